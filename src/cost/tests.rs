//! Every pricing unit against a figure computed by hand (in the comments), from the built-in
//! prices where they exist and from small tables of its own where a unit has none built in.

use super::*;
use crate::api::rerank::{QueryCounting, Usage as RerankUsage};
use crate::caps::prices::{builtin, load, Price};
use crate::common::images::ImageUsage;
use crate::stream::audio::SpeechUsage;

fn price(kind: &str, model: &str) -> Price {
    builtin()
        .unwrap()
        .get(kind, model)
        .unwrap_or_else(|| panic!("{kind} {model}"))
        .clone()
}

/// An entry of a table written here.
fn own(entry: &str) -> Price {
    let text =
        format!("k:\n  m:\n{entry}    source: https://example.com\n    checked: 2026-11-27\n");
    load(&text).unwrap().get("k", "m").unwrap().clone()
}

fn nanos(c: &Result<Cost, NoCost>) -> u64 {
    c.as_ref().unwrap_or_else(|e| panic!("{e}")).amount.nanos()
}

#[test]
fn speech_by_characters() {
    // 1,234 characters at $15 / 1M = $0.01851.
    let c = of(
        &price("openai", "tts-1"),
        &Metered::Speech(SpeechMetered {
            characters: 1_234,
            text_tokens: 300,
            reported: None,
        }),
    )
    .unwrap();
    assert_eq!(c.amount.to_string(), "0.01851");
    assert_eq!((c.currency.as_str(), c.basis), ("USD", Basis::Gateway));
    assert_eq!(c.partial, None);
    let k = known(
        &price("openai", "tts-1-hd"),
        &Planned::Speech {
            characters: 1_000,
            text_tokens: 0,
        },
    );
    // 1,000 characters at $30 / 1M = $0.03.
    assert_eq!(nanos(&k), 30_000_000);
}

#[test]
fn speech_by_token_kind_for_gpt_4o_mini_tts() {
    let p = price("openai", "gpt-4o-mini-tts");
    // Reported: 100 text tokens at $0.60 / 1M + 600 audio tokens at $12 / 1M
    // = $0.00006 + $0.0072 = $0.00726.
    let c = of(
        &p,
        &Metered::Speech(SpeechMetered {
            characters: 400,
            text_tokens: 90,
            reported: Some(SpeechUsage {
                input_tokens: Some(100),
                output_tokens: Some(600),
            }),
        }),
    )
    .unwrap();
    assert_eq!(c.amount.to_string(), "0.00726");
    assert_eq!((c.basis, c.partial), (Basis::Provider, None));
    // Nothing reported (the raw-audio answer): the gateway's 90 text tokens ($0.000054), and the
    // audio it cannot count is named, never priced at 0 silently.
    let c = of(
        &p,
        &Metered::Speech(SpeechMetered {
            characters: 400,
            text_tokens: 90,
            reported: None,
        }),
    )
    .unwrap();
    assert_eq!(c.amount.to_string(), "0.000054");
    assert_eq!(c.basis, Basis::Gateway);
    assert!(c.partial.unwrap().contains("audio output tokens"));
    // Before the call, the same: a lower bound.
    let k = known(
        &p,
        &Planned::Speech {
            characters: 400,
            text_tokens: 90,
        },
    )
    .unwrap();
    assert!(k.partial.is_some() && k.amount.nanos() == 54_000);
}

#[test]
fn images_by_token_kind_for_gpt_image_2() {
    let usage = ImageUsage {
        input_tokens: 1_050,
        output_tokens: 4_160,
        total_tokens: 5_210,
        input_tokens_details: [("text_tokens".into(), 50), ("image_tokens".into(), 1_000)].into(),
        output_tokens_details: Default::default(),
    };
    // 50 text in × $5 + 1,000 image in × $8 + 4,160 image out × $30, per 1M
    // = (250 + 8,000 + 124,800) / 1M = $0.13305 (image output at the text rate, $10, would
    // make it $0.04985).
    let c = of(
        &price("openai", "gpt-image-2"),
        &Metered::Images(ImagesMetered {
            images: 1,
            size: Some("1024x1024"),
            quality: Some("high"),
            input_pixels: &[],
            unmeasured_inputs: 0,
            reported: Some(&usage),
        }),
    )
    .unwrap();
    assert_eq!(c.amount.to_string(), "0.13305");
    assert_eq!((c.basis, c.partial), (Basis::Provider, None));
    // Input not itemised: all at the text rate, and said so.
    let flat = ImageUsage {
        input_tokens: 100,
        output_tokens: 1_000,
        ..ImageUsage::default()
    };
    let c = of(
        &price("openai", "gpt-image-2"),
        &Metered::Images(ImagesMetered {
            images: 1,
            reported: Some(&flat),
            ..ImagesMetered::default()
        }),
    )
    .unwrap();
    // 100 × $5 + 1,000 × $30 = $0.0305 per 1M units.
    assert_eq!(c.amount.to_string(), "0.0305");
    assert!(c.partial.unwrap().contains("text rate"));
}

#[test]
fn image_cost_differs_by_size_and_quality() {
    let p = price("openai", "gpt-image-2");
    let cost = |n, size, quality| {
        known(
            &p,
            &Planned::Images {
                n,
                size: Some(size),
                quality: Some(quality),
                input_pixels: &[],
                unmeasured_inputs: 0,
            },
        )
    };
    // OpenAI's per-image figures: 2 × $0.211, 2 × $0.165, 2 × $0.006, 3 × $0.053.
    assert_eq!(nanos(&cost(2, "1024x1024", "high")), 422_000_000);
    assert_eq!(nanos(&cost(2, "1024x1536", "high")), 330_000_000);
    assert_eq!(nanos(&cost(2, "1024x1024", "low")), 12_000_000);
    assert_eq!(nanos(&cost(3, "1024x1024", "medium")), 159_000_000);
    // A size the table does not list has no cost rather than a guessed one.
    assert!(matches!(
        cost(1, "1536x1024", "high"),
        Err(NoCost::NotBillable(_))
    ));
    // Without the provider's usage, the delivered images are priced the same way (the gateway's
    // count).
    let c = of(
        &p,
        &Metered::Images(ImagesMetered {
            images: 2,
            size: Some("1024x1024"),
            quality: Some("high"),
            ..ImagesMetered::default()
        }),
    )
    .unwrap();
    assert_eq!((c.amount.nanos(), c.basis), (422_000_000, Basis::Gateway));

    // A table by size alone and one by quality alone, in yuan.
    let by_size =
        own("    currency: CNY\n    images: {by_size: {1024x1024: 0.14, 2048x2048: 0.2}}\n");
    let one = |p: &Price, size, quality| {
        known(
            p,
            &Planned::Images {
                n: 1,
                size,
                quality,
                input_pixels: &[],
                unmeasured_inputs: 0,
            },
        )
    };
    assert_eq!(nanos(&one(&by_size, Some("2048x2048"), None)), 200_000_000);
    assert_eq!(
        nanos(&one(&by_size, Some("1024x1024"), Some("hd"))),
        140_000_000
    );
    assert!(one(&by_size, None, None).is_err());
    let by_quality =
        own("    currency: USD\n    images: {by_quality: {standard: 0.04, hd: 0.08}}\n");
    assert_eq!(
        nanos(&one(&by_quality, Some("1x1"), Some("hd"))),
        80_000_000
    );
    let flat = price("stability", "sd3.5-large");
    assert_eq!(nanos(&one(&flat, None, None)), 65_000_000);
}

#[test]
fn images_by_megapixel_for_flux_2() {
    let p = price("bfl", "flux-2-pro");
    let cost = |n, size, input_pixels: &[u64]| {
        known(
            &p,
            &Planned::Images {
                n,
                size: Some(size),
                quality: None,
                input_pixels,
                unmeasured_inputs: 0,
            },
        )
    };
    // 1024×1024 is one megapixel: $0.03.
    assert_eq!(nanos(&cost(1, "1024x1024", &[])), 30_000_000);
    // 1440×1440 = 2,073,600 px, 1.98 MP: two started, $0.03 + $0.015.
    assert_eq!(nanos(&cost(1, "1440x1440", &[])), 45_000_000);
    // Two 2048×2048 images (4 MP each): 2 × ($0.03 + 3 × $0.015) = $0.15.
    assert_eq!(nanos(&cost(2, "2048x2048", &[])), 150_000_000);
    // An edit with one 1 MP input image: $0.03 + $0.015.
    assert_eq!(nanos(&cost(1, "1024x1024", &[1024 * 1024])), 45_000_000);
    // Two inputs of 1.5 MP each: two started megapixels each, 4 × $0.015.
    assert_eq!(
        nanos(&cost(1, "1024x1024", &[1536 * 1024, 1536 * 1024])),
        90_000_000
    );
    // An input given by URL is not measured: the cost counts the rest and says it is a lower
    // bound.
    let by_url = of(
        &p,
        &Metered::Images(ImagesMetered {
            images: 1,
            size: Some("1024x1024"),
            input_pixels: &[1024 * 1024],
            unmeasured_inputs: 1,
            ..ImagesMetered::default()
        }),
    )
    .unwrap();
    assert_eq!(by_url.amount.nanos(), 45_000_000);
    assert!(by_url
        .partial
        .as_deref()
        .is_some_and(|p| p.contains("1 input image(s) given by URL")));
    // Megapixel pricing needs the size.
    let unknown = known(
        &p,
        &Planned::Images {
            n: 1,
            size: None,
            quality: None,
            input_pixels: &[],
            unmeasured_inputs: 0,
        },
    );
    assert!(unknown.is_err());
}

fn rerank_usage(total: u64) -> RerankUsage {
    RerankUsage {
        total_tokens: total,
        query_tokens: 0,
        documents_tokens: total,
    }
}

#[test]
fn rerank_per_search_unit_is_never_zero() {
    let p = price("cohere", "rerank-v4.0-pro");
    let usage = rerank_usage(2_000);
    let docs = [100u64; 150];
    let metered = |search_units| {
        of(
            &p,
            &Metered::Rerank(RerankMetered {
                usage: &usage,
                billed: false,
                query_tokens: 10,
                document_tokens: &docs,
                search_units,
            }),
        )
        .unwrap()
    };
    // Cohere billed 1 unit: 1 × $2.50 / 1,000 = $0.0025.
    let c = metered(Some(1.0));
    assert_eq!(
        (c.amount.to_string(), c.basis),
        ("0.0025".into(), Basis::Provider)
    );
    // Not reported: 150 documents of 110 tokens with the query, one chunk each, make two units
    // of up to 100: $0.005.
    let c = metered(None);
    assert_eq!(
        (c.amount.to_string(), c.basis),
        ("0.005".into(), Basis::Gateway)
    );
    // A 1,200-token document with a 10-token query is three 500-token chunks: with 98 short
    // documents, 101 chunks, two units.
    let mut long = vec![1_200u64];
    long.extend([50u64; 98]);
    let k = known(
        &p,
        &Planned::Rerank {
            query_tokens: 10,
            document_tokens: &long,
            counting: QueryCounting::PerDocument,
        },
    );
    assert_eq!(nanos(&k), 5_000_000);
    // One short document is still one unit.
    let k = known(
        &price("cohere", "rerank-v4.0-fast"),
        &Planned::Rerank {
            query_tokens: 5,
            document_tokens: &[20],
            counting: QueryCounting::PerDocument,
        },
    );
    assert_eq!(nanos(&k), 2_000_000);
}

#[test]
fn rerank_per_query_is_never_zero() {
    let p = own("    currency: USD\n    queries: {price: 1, per: 1000, documents: 100}\n");
    let plan = |docs: &[u64]| {
        known(
            &p,
            &Planned::Rerank {
                query_tokens: 8,
                document_tokens: docs,
                counting: QueryCounting::Once,
            },
        )
    };
    // 40 documents: one query at $1 / 1,000 = $0.001; 250 documents: three queries, $0.003.
    assert_eq!(nanos(&plan(&[30; 40])), 1_000_000);
    assert_eq!(nanos(&plan(&[30; 250])), 3_000_000);
}

#[test]
fn rerank_by_tokens() {
    let p = price("voyage", "rerank-2.5");
    let usage = rerank_usage(12_345);
    let metered = |billed| {
        of(
            &p,
            &Metered::Rerank(RerankMetered {
                usage: &usage,
                billed,
                query_tokens: 0,
                document_tokens: &[],
                search_units: None,
            }),
        )
        .unwrap()
    };
    // 12,345 tokens at $0.05 / 1M = $0.00061725.
    let c = metered(true);
    assert_eq!(
        (c.amount.to_string(), c.basis),
        ("0.00061725".into(), Basis::Provider)
    );
    assert_eq!(metered(false).basis, Basis::Gateway);
    // Before the call, the query counted per document as Voyage bills it: 10 × 2 + 100 + 200 =
    // 320 tokens at $0.05 / 1M = $0.000016.
    let k = known(
        &p,
        &Planned::Rerank {
            query_tokens: 10,
            document_tokens: &[100, 200],
            counting: QueryCounting::PerDocument,
        },
    );
    assert_eq!(nanos(&k), 16_000);
}

#[test]
fn a_price_in_other_units_gives_no_cost_rather_than_zero() {
    let images_only = price("stability", "core");
    let c = of(
        &images_only,
        &Metered::Speech(SpeechMetered {
            characters: 10,
            ..SpeechMetered::default()
        }),
    );
    let Err(NoCost::NotBillable(why)) = c else {
        panic!("{c:?}")
    };
    assert!(why.contains("images"), "{why}");
    // Token-priced images without the provider's usage or a per-image figure.
    let tokens_only = own("    currency: USD\n    tokens: {per: 1000000, image_out: 30}\n");
    assert!(of(
        &tokens_only,
        &Metered::Images(ImagesMetered {
            images: 1,
            ..ImagesMetered::default()
        })
    )
    .is_err());
}

#[test]
fn gemini_image_cost_from_usage_metadata_and_per_tier_figures() {
    // `usageMetadata` as the Gemini adapter passes it on: 12 text and 560 image tokens in (one
    // reference image), one image out.
    let usage = |image_out: u64| ImageUsage {
        input_tokens: 572,
        output_tokens: image_out,
        total_tokens: 572 + image_out,
        input_tokens_details: [("text_tokens".into(), 12), ("image_tokens".into(), 560)].into(),
        output_tokens_details: [("image_tokens".into(), image_out)].into(),
    };
    let metered = |p: &Price, u: &ImageUsage, size| {
        of(
            p,
            &Metered::Images(ImagesMetered {
                images: 1,
                size: Some(size),
                reported: Some(u),
                ..ImagesMetered::default()
            }),
        )
    };
    // Gemini 3 Pro Image at 1K (1,120 image tokens): (12 × $2 + 560 × $2 + 1,120 × $120) / 1M
    // = (24 + 1,120 + 134,400) / 1M = $0.135544.
    let pro = price("gemini", "gemini-3-pro-image");
    let c = metered(&pro, &usage(1_120), "1K").unwrap();
    assert_eq!((c.amount.nanos(), c.basis), (135_544_000, Basis::Provider));
    assert_eq!(c.currency.as_str(), "USD");
    // Gemini 3.1 Flash Image at 4K (2,520 image tokens): (12 × $0.50 + 560 × $0.50 + 2,520 ×
    // $60) / 1M = (6 + 280 + 151,200) / 1M = $0.151486. The resolution is in the token count.
    let flash = price("gemini", "gemini-3.1-flash-image");
    assert_eq!(nanos(&metered(&flash, &usage(2_520), "4K")), 151_486_000);
    // Thinking tokens (`reasoning_tokens`, from `thoughtsTokenCount`) are billed as text
    // output: 200 more at $12 per 1M on Pro add $0.0024.
    let mut thinking = usage(1_120);
    thinking
        .output_tokens_details
        .insert("reasoning_tokens".into(), 200);
    assert_eq!(nanos(&metered(&pro, &thinking, "1K")), 137_944_000);
    // Before the call: Google's per-image figures by the size's tier.
    let planned = |p: &Price, n, size| {
        known(
            p,
            &Planned::Images {
                n,
                size: Some(size),
                quality: None,
                input_pixels: &[],
                unmeasured_inputs: 0,
            },
        )
    };
    // 2 × 4K ($0.24) and 1 × a 1K 16:9 image ($0.134) for Pro; a 2K 1:4 image ($0.101) and a
    // 1K 1:4 image ($0.067) for 3.1 Flash.
    assert_eq!(nanos(&planned(&pro, 2, "4096x4096")), 480_000_000);
    assert_eq!(nanos(&planned(&pro, 1, "1376x768")), 134_000_000);
    assert_eq!(nanos(&planned(&flash, 1, "1024x4096")), 101_000_000);
    assert_eq!(nanos(&planned(&flash, 1, "512x2048")), 67_000_000);
    // A tier keyword names no pixel size: no figure before the call rather than a guess.
    assert!(matches!(
        planned(&flash, 1, "1K"),
        Err(NoCost::NotBillable(_))
    ));
    // Gemini 2.5 Flash Image: one flat figure, $0.039 an image.
    let old = price("gemini", "gemini-2.5-flash-image");
    assert_eq!(nanos(&planned(&old, 3, "1344x768")), 117_000_000);
}

#[test]
fn yuan_and_dollar_prices_of_the_speech_rerank_and_image_providers() {
    let speech = |p: &Price, characters| {
        of(
            p,
            &Metered::Speech(SpeechMetered {
                characters,
                ..SpeechMetered::default()
            }),
        )
        .unwrap()
    };
    // Qwen3-TTS-Flash: 12,345 characters at 0.8 CNY / 10,000 = 0.98760 CNY.
    let c = speech(&price("dashscope", "qwen3-tts-flash"), 12_345);
    assert_eq!(
        (c.amount.nanos(), c.currency.as_str()),
        (987_600_000, "CNY")
    );
    // MiniMax Speech 2.8 HD: 2,500 characters at $100 / 1M = $0.25; ElevenLabs Flash v2.5:
    // 2,500 at $0.05 / 1,000 = $0.125.
    let c = speech(&price("minimax", "speech-2.8-hd"), 2_500);
    assert_eq!(
        (c.amount.nanos(), c.currency.as_str()),
        (250_000_000, "USD")
    );
    let c = speech(&price("elevenlabs", "eleven_flash_v2_5"), 2_500);
    assert_eq!(c.amount.nanos(), 125_000_000);
    // Qwen3-Rerank: 10,000 billed tokens at 0.5 CNY / 1M = 0.005 CNY.
    let usage = rerank_usage(10_000);
    let c = of(
        &price("dashscope", "qwen3-rerank"),
        &Metered::Rerank(RerankMetered {
            usage: &usage,
            billed: true,
            query_tokens: 0,
            document_tokens: &[],
            search_units: None,
        }),
    )
    .unwrap();
    assert_eq!((c.amount.nanos(), c.basis), (5_000_000, Basis::Provider));
    // GLM-Image: 2 images at 0.1 CNY each = 0.2 CNY.
    let c = of(
        &price("zhipu", "glm-image"),
        &Metered::Images(ImagesMetered {
            images: 2,
            size: Some("1280x1280"),
            ..ImagesMetered::default()
        }),
    )
    .unwrap();
    assert_eq!(
        (c.amount.nanos(), c.currency.as_str()),
        (200_000_000, "CNY")
    );
}
