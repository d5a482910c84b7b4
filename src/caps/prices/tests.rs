use super::*;

fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).unwrap()
}

fn over(text: &str) -> Override {
    let mut errors = Vec::new();
    let o = Override::read(&yaml(text), "at", &mut errors);
    assert!(errors.is_empty(), "{errors:?}");
    o.unwrap()
}

#[test]
fn the_builtin_table_loads_with_every_entry_sourced_and_dated() {
    let t = builtin().unwrap_or_else(|e| panic!("{e:#?}"));
    for p in t.entries.values() {
        assert!(p.source.is_some() && p.checked.is_some(), "{p:?}");
    }
    let tts = t.get("openai", "tts-1").unwrap();
    assert_eq!(tts.currency.as_str(), "USD");
    assert_eq!(tts.characters.unwrap().price.to_string(), "15");
    assert_eq!(tts.characters.unwrap().per, 1_000_000);
    let mini = t.get("openai", "gpt-4o-mini-tts-2025-12-15").unwrap();
    let tokens = mini.tokens.as_ref().unwrap();
    assert_eq!(
        tokens.rate(TokenKind::TextIn).unwrap().price.to_string(),
        "0.6"
    );
    assert_eq!(
        tokens.rate(TokenKind::AudioOut).unwrap().price.to_string(),
        "12"
    );
    let image = t.get("openai", "gpt-image-2").unwrap();
    let per = image.images.as_ref().unwrap();
    assert_eq!(
        per.per_image(Some("1024x1024"), Some("high"))
            .unwrap()
            .to_string(),
        "0.211"
    );
    assert_eq!(per.per_image(Some("1536x1024"), Some("high")), None);
    assert!(t
        .get("cohere", "rerank-v4.0-pro")
        .unwrap()
        .search_units
        .is_some());
    assert!(t.get("bfl", "flux-2-pro").unwrap().megapixels.is_some());
    // GPT Image 2.5/2.6 at gpt-image-2's token rates (OpenAI's model page, 2026-12-02).
    for m in [
        "gpt-image-2.5-flare",
        "gpt-image-2.5-sunburst",
        "gpt-image-2.6-flare",
        "gpt-image-2.6-sunburst",
    ] {
        let tokens = t.get("openai", m).unwrap().tokens.as_ref().unwrap();
        assert_eq!(
            tokens.rate(TokenKind::ImageOut).unwrap().price.to_string(),
            "30",
            "{m}"
        );
        assert_eq!(
            tokens.rate(TokenKind::ImageIn).unwrap().price.to_string(),
            "8",
            "{m}"
        );
    }
    let banana = t.get("gemini", "gemini-nano-banana-2.1").unwrap();
    assert_eq!(
        banana
            .images
            .as_ref()
            .unwrap()
            .per_image(Some("1376x768"), None)
            .unwrap()
            .to_string(),
        "0.0336"
    );
    // Never a guessed figure: a model no source confirmed is simply absent.
    assert!(t.get("ark", "doubao-seedream-5-0-pro-260628").is_none());
}

#[test]
fn a_bad_entry_is_named_by_path() {
    let errors = load(
        "openai:\n  a:\n    currency: usd\n    characters: {price: -1, per: 0}\n    source: somewhere\n    checked: 2026-13-01\n  b:\n    currency: USD\n    colour: red\n    source: https://x\n    checked: 2026-11-27\n  c:\n    currency: USD\n    tokens: {per: 1000}\n    images: {per_image: 1, by_size: {1x1: 1}}\n    source: https://x\n    checked: 2026-11-27\n  d:\n    currency: USD\n    images: {per_image: 0.04}\n",
    )
    .unwrap_err()
    .join("\n");
    for needle in [
        "openai.a.currency: `usd` is not an ISO 4217 code",
        "openai.a.characters.price: `-1` is not an amount",
        "openai.a.characters.per: must be a whole number above 0",
        "openai.a.source: must be the URL",
        "openai.a.checked: `2026-13-01` is not a date",
        "openai.b.colour: unknown key",
        "openai.c.tokens: give the price of at least one kind of token",
        "openai.c.images: give exactly one of",
        "openai.d.source: required",
        "openai.d.checked: required",
    ] {
        assert!(errors.contains(needle), "missing `{needle}` in:\n{errors}");
    }
    // An entry with no rate at all.
    let errors =
        load("x:\n  m:\n    currency: USD\n    source: https://x\n    checked: 2026-11-27\n")
            .unwrap_err();
    assert!(errors[0].contains("x.m: no rate"), "{errors:?}");
}

#[test]
fn an_override_replaces_keys_of_the_builtin_entry_and_a_targets_wins_over_its_models() {
    let t = builtin().unwrap();
    // The model's currency and rate, over the built-in tts-1 entry: its source stays.
    let model = over("{currency: EUR, characters: {price: 14, per: 1000000}}");
    let Priced::Known(p) = t
        .resolve("openai", "tts-1", Some(&model), None, "at")
        .unwrap()
    else {
        panic!("priced")
    };
    assert_eq!(
        (p.currency.as_str(), p.characters.unwrap().price.to_string()),
        ("EUR", "14".into())
    );
    assert!(p.source.is_some());
    // The target's own rate wins over the model's, key by key.
    let target = over("{characters: {price: 0.5, per: 1000}}");
    let Priced::Known(p) = t
        .resolve("openai", "tts-1", Some(&model), Some(&target), "at")
        .unwrap()
    else {
        panic!("priced")
    };
    assert_eq!(p.currency.as_str(), "EUR");
    assert_eq!(p.characters.unwrap().per, 1000);
    // `model:` names the entry to start from (an Azure deployment called otherwise).
    let named = over("{model: tts-1-hd}");
    let Priced::Known(p) = t
        .resolve("openai", "my-voice", None, Some(&named), "at")
        .unwrap()
    else {
        panic!("priced")
    };
    assert_eq!(p.characters.unwrap().price.to_string(), "30");
    // A model the table lacks, priced whole in the configuration, in yuan.
    let cny = over("{currency: CNY, images: {per_image: 0.2}}");
    let Priced::Known(p) = t
        .resolve("ark", "doubao-seedream-4-0-250828", Some(&cny), None, "at")
        .unwrap()
    else {
        panic!("priced")
    };
    assert_eq!(p.currency.as_str(), "CNY");
}

#[test]
fn unpriced_and_unknown_models_have_no_price_never_zero() {
    let t = builtin().unwrap();
    assert_eq!(
        t.resolve("ark", "doubao-seedream-5-0-flash-260915", None, None, "at"),
        Ok(Priced::Unknown)
    );
    let declared = over("unpriced");
    assert_eq!(
        t.resolve("openai", "tts-1", None, Some(&declared), "at"),
        Ok(Priced::Declared)
    );
    // The model says unpriced; the target may still give its own price.
    let target = over("{currency: USD, characters: {price: 1, per: 1000}}");
    assert!(matches!(
        t.resolve("openai", "x", Some(&declared), Some(&target), "at"),
        Ok(Priced::Known(_))
    ));
    // Keys over nothing: an error naming what is missing, not a partial price.
    let partial = over("{currency: USD}");
    let e = t
        .resolve("openai", "unlisted", Some(&partial), None, "m.price")
        .unwrap_err();
    assert!(
        e.contains("m.price: no built-in price for openai model `unlisted`"),
        "{e}"
    );
    let e = t
        .resolve("openai", "x", None, Some(&over("{model: nope}")), "t.price")
        .unwrap_err();
    assert!(e.starts_with("t.price.model: no built-in price"), "{e}");
    // A word other than `unpriced` is refused.
    let mut errors = Vec::new();
    assert!(Override::read(&yaml("free"), "p", &mut errors).is_none());
    assert!(errors[0].contains("`free` is not a price"), "{errors:?}");
}
