//! Tests of the capability table: the built-in data, the loader's path-named errors, the new rule
//! kinds, and a model's overrides merged onto its family.

use serde_yaml::Value;

use super::*;

/// A small valid table: one family per operation, plus a template.
const SYNTHETIC: &str = r#"
templates:
  base-image:
    operation: images
    sizes: [1024x1024, auto]
    default_size: 1024x1024
    aspect_ratios: {"1:1": 1024x1024}
    qualities: []
    max_n: 1
    per_call_n: 1
    output_formats: [png]
    negative_prompt: false
    reference_image: false
    image_required: false
    strength: false
    mask: false
    watermark: false
    backgrounds: []
    style_presets: []
    extra_body_keys: []
    prompt_limit: {max: 1000, unit: characters}
    native_fields: []
families:
  talk:
    operation: speech
    formats: [mp3, wav]
    speeds: [1]
    instructions: false
    sse_formats: [mp3]
    input_limit: {max: 5000, unit: bytes}
    default_voice: anna
    voices: [anna, bert]
    native_fields: []
  paint:
    extends: base-image
    sizes: {list: [1024x1024], min_side: 512, max_side: 2048, multiple_of: 16, max_pixels: 2097152}
    qualities: [standard, hd]
    default_quality: hd
    max_n: 4
    output_formats: [jpg, png]
    default_output_format: jpg
    prompt_limit: {max: 300, unit: tokens}
  rank:
    operation: rerank
    max_documents: 100
    query_limit: {max: 2000, unit: characters}
    native_fields: [truncate]
"#;

fn errors_of(yaml: &str) -> String {
    match load(yaml) {
        Ok(_) => panic!("the table loaded:\n{yaml}"),
        Err(e) => e.join("\n"),
    }
}

fn assert_has(all: &str, needles: &[&str]) {
    for n in needles {
        assert!(all.contains(n), "missing `{n}` in:\n{all}");
    }
}

fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).unwrap()
}

fn images(c: Caps) -> &'static ImageCaps {
    match c {
        Caps::Images(c) => c,
        other => panic!("not images: {other:?}"),
    }
}

fn speech(c: Caps) -> &'static SpeechCaps {
    match c {
        Caps::Speech(c) => c,
        other => panic!("not speech: {other:?}"),
    }
}

#[test]
fn the_builtin_table_loads() {
    let table = builtin().unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(table.names().len(), 93);
    let gemini_tts = speech(table.get("gemini-3.8-tts").unwrap());
    assert_eq!(gemini_tts.speeds, [1.0]);
    assert_eq!(gemini_tts.default_voice, Some("Kore"));
    assert!(
        gemini_tts.voices.is_empty(),
        "the provider's list, not a fixed one"
    );
    // A few values, to catch a loader that reads keys into the wrong place.
    let kontext = images(table.get("flux-kontext").unwrap());
    assert_eq!(kontext.family, "flux-kontext");
    assert_eq!(kontext.max_n, 4);
    assert!(kontext.reference_image);
    assert_eq!(kontext.aspect_ratios[7], ("21:9", "1568x672"));
    let seedream = images(table.get("seedream").unwrap());
    assert_eq!(seedream.output_formats, ["jpg"]);
    assert_eq!(seedream.default_output_format, "jpg");
    assert_eq!(seedream.prompt_limit.max, 4000);
    assert_eq!(seedream.prompt_limit.unit, Unit::Characters);
    let google = speech(table.get("google-tts").unwrap());
    assert_eq!(google.speeds, [0.25, 0.5, 1.0, 2.0]);
    assert_eq!(google.input_limit.unit, Unit::Bytes);
    assert!(google.voices.is_empty(), "no voice list: any voice");
    assert!(family("image-none").is_none(), "templates are not families");
    // Retired families are not offered, and say what replaced them.
    assert!(family("dall-e-3").is_none());
    assert!(table
        .retired("dall-e-3")
        .is_some_and(|why| why.contains("gpt-image-2")));
    assert!(table.retired("gpt-image-2").is_none());
    let gpt_image_2 = images(table.get("gpt-image-2").unwrap());
    assert!(gpt_image_2.accepts_size("3840x2160") && gpt_image_2.accepts_size("auto"));
    assert!(
        !gpt_image_2.accepts_size("3840x2176"),
        "over 8,294,400 pixels"
    );
    // December 2026: Nano Banana 2.1 has 3.1 Flash Image's 14 ratios but no 512 tier; Seedream
    // 5.0 Pro (and Flash) take Ark's 1.5K tier; Recraft V4.1 Flash takes no style.
    let banana = images(table.get("gemini-nano-banana-2.1").unwrap());
    assert!(!banana.accepts_size("512") && banana.accepts_size("4K"));
    assert!(images(table.get("gemini-flash-image").unwrap()).accepts_size("512"));
    assert_eq!(banana.aspect_ratios.len(), 14);
    let pro = images(table.get("seedream-5-pro").unwrap());
    assert!(pro.accepts_size("1.5K") && !pro.accepts_size("4K") && !pro.accepts_size("3K"));
    let flash = images(table.get("recraft-v4-flash").unwrap());
    assert_eq!(flash.native_fields, ["controls"]);
    assert_eq!(flash.sizes, images(table.get("recraft-v4").unwrap()).sizes);
    assert!(speech(table.get("openai-tts-instruct").unwrap()).custom_voices);
    assert!(!speech(table.get("openai-tts").unwrap()).custom_voices);
    assert!(table
        .names()
        .join(", ")
        .starts_with("openai-tts, openai-tts-instruct, "));
}

#[test]
fn a_synthetic_table_loads_with_every_rule_kind() {
    let table = load(SYNTHETIC).unwrap_or_else(|e| panic!("{e:#?}"));
    let paint = images(table.get("paint").unwrap());
    assert_eq!(paint.sizes, ["1024x1024"]);
    assert!(paint.accepts_size("1280x720"), "allowed by the rule");
    assert!(!paint.accepts_size("1280x721"), "not a multiple of 16");
    assert!(
        !paint.accepts_size("auto"),
        "the list replaced the template's"
    );
    assert_eq!(paint.default_quality, Some("hd"));
    assert_eq!(paint.default_output_format, "jpg");
    assert_eq!(
        paint.prompt_limit,
        Limit {
            max: 300,
            unit: Unit::Tokens
        }
    );
    assert!(!paint.watermark, "from the template");
    let talk = speech(table.get("talk").unwrap());
    assert_eq!(talk.voices, ["anna", "bert"]);
    assert_eq!(talk.input_limit.unit, Unit::Bytes);
    match table.get("rank") {
        Some(Caps::Rerank(r)) => assert_eq!(r.max_documents, 100),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_keys_are_refused_by_name() {
    let all = errors_of(
        r#"
colours: 1
families:
  r:
    operation: rerank
    max_documents: 10
    max_docs: 3
    query_limit: {max: 10, unit: characters, per: doc}
    native_fields: []
"#,
    );
    assert_has(
        &all,
        &[
            "colours: unknown key",
            "families.r.max_docs: unknown key",
            "families.r.query_limit.per: unknown key",
        ],
    );
}

#[test]
fn malformed_values_are_named_by_path() {
    let all = errors_of(
        r#"
families:
  flux:
    operation: images
    sizes: [1024x1024, 512x512, 1024X768, 1024x1024]
    default_size: 2048x2048
    aspect_ratios: {"16/9": 1024x1024, "1:1": 640x640}
    qualities: [ultra]
    default_quality: standard
    max_n: 11
    per_call_n: 0
    output_formats: []
    default_output_format: png
    negative_prompt: false
    reference_image: false
    max_images: 2
    image_required: true
    strength: false
    mask: true
    watermark: false
    backgrounds: []
    style_presets: [""]
    extra_body_keys: []
    prompt_limit: {max: 0, unit: characters}
    native_fields: [seed, seed]
"#,
    );
    assert_has(
        &all,
        &[
            "families.flux.sizes[2]: `1024X768` is neither WxH",
            "families.flux.sizes[3]: `1024x1024` is listed twice",
            "families.flux.default_size: `2048x2048` is not a size the family accepts",
            "families.flux.aspect_ratios.16/9: `16/9` is not an aspect ratio",
            "families.flux.aspect_ratios.1:1: `640x640` is not a size the family accepts",
            "families.flux.qualities[0]: `ultra` is not a public quality",
            "families.flux.max_n: must be from 1 to 10",
            "families.flux.per_call_n: must be at least 1",
            "families.flux.output_formats: must list at least one value",
            "families.flux.default_output_format: `png` is not one of the output_formats",
            "families.flux.image_required: needs reference_image: true",
            "families.flux.max_images: needs reference_image: true",
            "families.flux.mask: needs reference_image: true",
            "families.flux.style_presets[0]: must not be empty",
            "families.flux.native_fields[1]: `seed` is listed twice",
            "families.flux.prompt_limit.max: must be at least 1",
        ],
    );
    // A value of the wrong type stops the reading of its entry (serde cannot go on), so it comes
    // alone.
    let all = errors_of(&SYNTHETIC.replace("unit: tokens", "unit: chars"));
    assert_has(
        &all,
        &["families.paint.prompt_limit.unit: unknown variant `chars`, expected one of `characters`, `bytes`, `tokens`"],
    );
}

#[test]
fn a_default_size_outside_the_rule_and_a_rule_without_a_bound_are_refused() {
    let all = errors_of(&SYNTHETIC.replace(
        "sizes: {list: [1024x1024], min_side: 512, max_side: 2048, multiple_of: 16, max_pixels: 2097152}",
        // `list: []`: a `sizes` mapping merges key by key, so without it the template's list stays.
        "sizes: {list: [], min_side: 1100, multiple_of: 16, min_aspect_ratio: \"2:1\", max_aspect_ratio: \"1:2\"}",
    ));
    assert_has(
        &all,
        &[
            "families.paint.default_size: `1024x1024` is not a size the family accepts (any WxH with sides of at least 1100 px",
            "families.paint.aspect_ratios.1:1: `1024x1024` is not a size the family accepts",
            "families.paint.sizes: a size rule needs an upper bound",
            "families.paint.sizes.min_aspect_ratio: 2:1 is wider than max_aspect_ratio 1:2",
        ],
    );
    let all = errors_of(&SYNTHETIC.replace(
        "sizes: {list: [1024x1024], min_side: 512, max_side: 2048, multiple_of: 16, max_pixels: 2097152}",
        "sizes: {list: [], min_side: 4096, max_side: 2048, max_aspect_ratio: wide}",
    ));
    assert_has(
        &all,
        &[
            "families.paint.sizes.min_side: 4096 is larger than max_side 2048",
            "families.paint.sizes.max_aspect_ratio: `wide` is not an aspect ratio",
        ],
    );
}

#[test]
fn speech_lists_are_checked_against_the_api_and_each_other() {
    let all = errors_of(
        &SYNTHETIC
            .replace("formats: [mp3, wav]", "formats: [mp3, ogg]")
            .replace("sse_formats: [mp3]", "sse_formats: [wav]")
            .replace("speeds: [1]", "speeds: [1, 3]")
            .replace("default_voice: anna", "default_voice: carl"),
    );
    assert_has(
        &all,
        &[
            "families.talk.formats[1]: `ogg` is not a public response_format",
            "families.talk.sse_formats[0]: `wav` is not one of the family's formats",
            "families.talk.speeds[1]: 3 is not a public speed (one of 0.25, 0.5, 1, 2, 4)",
            "families.talk.default_voice: `carl` is not one of the voices (anna, bert)",
        ],
    );
}

#[test]
fn missing_keys_extends_and_operations_are_checked() {
    let all = errors_of(
        r#"
templates:
  lonely: {operation: rerank, max_documents: 1, query_limit: {max: 1, unit: bytes}, native_fields: []}
families:
  a: {operation: speech, formats: [mp3]}
  b: {extends: nowhere}
  c: {extends: d}
  d: {extends: c}
  e: {max_documents: 3}
  f: {operation: sing}
  g: {extends: a, operation: rerank}
"#,
    );
    assert_has(
        &all,
        &[
            "families.a.speeds: missing (set it, or inherit it with `extends`)",
            "families.a.input_limit: missing",
            "families.b.extends: no template or family named `nowhere`",
            "families.c.extends: `d` leads back to `c` (a cycle)",
            "families.d.extends: `c` leads back to `d` (a cycle)",
            "families.e.operation: missing (one of speech, images, rerank",
            "families.f.operation: `sing` is not one of speech, images, rerank",
            "families.g.operation: `rerank` differs from `speech`, the operation of `a`",
            "templates.lonely: no family extends it",
        ],
    );
    assert!(!all.contains("families.f.operation: missing"), "{all}");
}

#[test]
fn overrides_merge_onto_the_family() {
    let table = load(SYNTHETIC).unwrap();
    // A rule bound changed, the list and the other bounds kept; a limit's unit kept.
    let c = table
        .with_overrides(
            "paint",
            &yaml("{sizes: {max_side: 1024}, max_n: 2, prompt_limit: {max: 10}}"),
            "m",
        )
        .unwrap_or_else(|e| panic!("{e:#?}"));
    let c = images(c);
    assert_eq!(c.family, "paint");
    assert_eq!(c.sizes, ["1024x1024"]);
    assert!(c.accepts_size("1024x512") && !c.accepts_size("1280x720"));
    assert_eq!(c.size_rule.and_then(|r| r.multiple_of), Some(16));
    assert_eq!(c.max_n, 2);
    assert_eq!(
        c.prompt_limit,
        Limit {
            max: 10,
            unit: Unit::Tokens
        }
    );
    // The short form replaces only the list.
    let c = images(
        table
            .with_overrides("paint", &yaml("{sizes: [auto, 1024x1024]}"), "m")
            .unwrap(),
    );
    assert_eq!(c.sizes, ["auto", "1024x1024"]);
    assert!(c.size_rule.is_some());
    // An empty voice list: any voice.
    let c = speech(
        table
            .with_overrides("talk", &yaml("{voices: [], default_voice: zed}"), "m")
            .unwrap(),
    );
    assert!(c.voices.is_empty());
    assert_eq!(c.default_voice, Some("zed"));
    // Nothing to override: the family's own capabilities, not a copy.
    let same = table.with_overrides("rank", &Value::Null, "m").unwrap();
    match (same, table.get("rank").unwrap()) {
        (Caps::Rerank(a), Caps::Rerank(b)) => assert!(std::ptr::eq(a, b)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_overrides_are_named_by_path() {
    let table = load(SYNTHETIC).unwrap();
    let at = "switchyard.models.x.capabilities";
    let all = table
        .with_overrides(
            "paint",
            &yaml("{sizes: {min_side: 256, max_side: 1440, multiple_of: 32}, max_n: 40, extends: talk, qualty: hd}"),
            at,
        )
        .unwrap_err()
        .join("\n");
    assert_has(
        &all,
        &[
            "switchyard.models.x.capabilities.extends: unknown key",
            "switchyard.models.x.capabilities.qualty: unknown key",
            "switchyard.models.x.capabilities.max_n: must be from 1 to 10",
        ],
    );
    let all = table
        .with_overrides(
            "paint",
            &yaml("{sizes: {min_side: 256, max_side: 1440, multiple_of: 32}, max_n: 40, default_size: 1440x1441}"),
            at,
        )
        .unwrap_err()
        .join("\n");
    assert_has(
        &all,
        &[
            "switchyard.models.x.capabilities.max_n: must be from 1 to 10",
            "switchyard.models.x.capabilities.default_size: `1440x1441` is not a size the family accepts (1024x1024, or any WxH with sides 256–1440 px, multiples of 32, at most 2097152 pixels)",
        ],
    );
    let all = table
        .with_overrides("talk", &yaml("{default_voice: carl, speeds: fast}"), at)
        .unwrap_err()
        .join("\n");
    assert_has(
        &all,
        &["switchyard.models.x.capabilities.speeds: invalid type"],
    );
    let all = table
        .with_overrides("talk", &yaml("[1]"), at)
        .unwrap_err()
        .join("\n");
    assert_has(&all, &["switchyard.models.x.capabilities: invalid type"]);
}

#[test]
fn retired_families_are_checked() {
    let all = errors_of(
        r#"
families:
  a: {operation: rerank, max_documents: 1, query_limit: {max: 1, unit: bytes}, native_fields: []}
retired:
  a: "gone; use b"
  b: ""
  c: 3
"#,
    );
    assert_has(
        &all,
        &[
            "retired.a: `a` is also a family",
            "retired: String(\"b\") must name a family and say what replaces it",
            "retired: String(\"c\") must name a family and say what replaces it",
        ],
    );
    let table = crate::caps::load(
        "families:\n  a: {operation: rerank, max_documents: 1, query_limit: {max: 1, unit: bytes}, native_fields: []}\nretired:\n  old: gone, use a\n",
    )
    .unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(table.retired("old"), Some("gone, use a"));
    assert_eq!(table.retired("a"), None);
    assert!(table.get("old").is_none());
}

#[test]
fn a_document_limit_is_optional_overridable_and_checked() {
    let table = load(SYNTHETIC).unwrap();
    let rerank = |c: Caps| match c {
        Caps::Rerank(r) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(rerank(table.get("rank").unwrap()).document_limit, None);
    let c = rerank(
        table
            .with_overrides(
                "rank",
                &yaml("{document_limit: {max: 512, unit: tokens}}"),
                "m",
            )
            .unwrap_or_else(|e| panic!("{e:#?}")),
    );
    assert_eq!(
        c.document_limit,
        Some(Limit {
            max: 512,
            unit: Unit::Tokens
        })
    );
    let all = errors_of(
        "families:\n  r: {operation: rerank, max_documents: 1, query_limit: {max: 1, unit: bytes}, document_limit: {max: 0, unit: characters}, native_fields: []}\n",
    );
    assert_has(&all, &["families.r.document_limit.max: must be at least 1"]);
    // The built-in table: Zhipu's 4,096 characters, and none where no provider states one.
    let builtin = builtin().unwrap();
    assert_eq!(
        rerank(builtin.get("zhipu-rerank").unwrap()).document_limit,
        Some(Limit {
            max: 4096,
            unit: Unit::Characters
        })
    );
    assert_eq!(
        rerank(builtin.get("cohere-rerank").unwrap()).document_limit,
        None
    );
}

/// gpt-4o-mini-tts takes at most 2,000 input tokens besides the endpoint's 4,096 characters (M4 of
/// the 2026-12-01 audit); the other OpenAI family has only the characters. ElevenLabs' families
/// name no default voice: none serves every account after 2026-12-31 (M7).
#[test]
fn december_2026_speech_bounds_and_voices() {
    let table = builtin().unwrap_or_else(|e| panic!("{e:#?}"));
    let instruct = speech(table.get("openai-tts-instruct").unwrap());
    assert_eq!(instruct.input_limit.max, 4096);
    assert_eq!(instruct.input_limit.unit, Unit::Characters);
    let tokens = instruct.input_token_limit.expect("a token bound");
    assert_eq!((tokens.max, tokens.unit), (2000, Unit::Tokens));
    assert!(speech(table.get("openai-tts").unwrap())
        .input_token_limit
        .is_none());
    for name in ["elevenlabs-tts", "elevenlabs-tts-flash", "elevenlabs-v3"] {
        assert_eq!(
            speech(table.get(name).unwrap()).default_voice,
            None,
            "{name}"
        );
    }
    assert_eq!(
        speech(table.get("openai-tts").unwrap()).default_voice,
        Some("alloy")
    );
    // A token bound counts tokens, nothing else.
    let problems = table
        .with_overrides(
            "openai-tts-instruct",
            &serde_yaml::from_str("{input_token_limit: {max: 10, unit: characters}}").unwrap(),
            "m",
        )
        .expect_err("refused");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("input_token_limit.unit: must be tokens")),
        "{problems:?}"
    );
}
