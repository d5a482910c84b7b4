//! Tests of the capability table: the built-in data, the loader's errors and overrides.

use super::*;

#[test]
fn the_builtin_table_loads() {
    let table = builtin().unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(table.names().len(), 36);
}

#[test]
fn tmp_same_as_statics() {
    use crate::catalog as old;
    for (name, o) in old::FAMILIES {
        let n = family(name).unwrap();
        match (o, n) {
            (old::Caps::Speech(o), Caps::Speech(n)) => {
                assert_eq!(o.formats, n.formats, "{name}");
                assert_eq!(o.speeds, n.speeds, "{name}");
                assert_eq!(o.instructions, n.instructions, "{name}");
                assert_eq!(o.sse_formats, n.sse_formats, "{name}");
                assert_eq!(o.max_input_chars, n.input_limit.max, "{name}");
                assert_eq!(n.input_limit.unit, Unit::Characters);
                assert_eq!(o.default_voice, n.default_voice, "{name}");
                assert_eq!(o.native_fields, n.native_fields, "{name}");
                assert!(n.voices.is_empty());
                assert_eq!(n.family, *name);
            }
            (old::Caps::Images(o), Caps::Images(n)) => {
                assert_eq!(o.sizes, n.sizes, "{name}");
                assert!(n.size_rule.is_none());
                assert_eq!(o.default_size, n.default_size, "{name}");
                assert_eq!(o.aspect_ratios, n.aspect_ratios, "{name}");
                assert_eq!(o.qualities, n.qualities, "{name}");
                assert_eq!(n.default_quality, None);
                assert_eq!(o.max_n, n.max_n, "{name}");
                assert_eq!(o.per_call_n, n.per_call_n, "{name}");
                assert_eq!(o.output_formats, n.output_formats, "{name}");
                let d = if o.output_formats.contains(&"png") {
                    "png"
                } else {
                    o.output_formats[0]
                };
                assert_eq!(d, n.default_output_format, "{name}");
                assert_eq!(o.negative_prompt, n.negative_prompt, "{name}");
                assert_eq!(o.reference_image, n.reference_image, "{name}");
                assert_eq!(o.image_required, n.image_required, "{name}");
                assert_eq!(o.strength, n.strength, "{name}");
                assert_eq!(o.mask, n.mask, "{name}");
                assert_eq!(o.watermark, n.watermark, "{name}");
                assert_eq!(o.backgrounds, n.backgrounds, "{name}");
                assert_eq!(o.style_presets, n.style_presets, "{name}");
                assert_eq!(o.extra_body_keys, n.extra_body_keys, "{name}");
                assert_eq!(o.max_prompt_chars, n.prompt_limit.max, "{name}");
                assert_eq!(n.prompt_limit.unit, Unit::Characters);
                assert_eq!(o.native_fields, n.native_fields, "{name}");
                assert_eq!(n.family, *name);
            }
            (old::Caps::Rerank(o), Caps::Rerank(n)) => {
                assert_eq!(o.max_documents, n.max_documents, "{name}");
                assert_eq!(o.max_query_chars, n.query_limit.max, "{name}");
                assert_eq!(n.query_limit.unit, Unit::Characters);
                assert_eq!(o.native_fields, n.native_fields, "{name}");
                assert_eq!(n.family, *name);
            }
            _ => panic!("{name}: operation differs"),
        }
    }
    assert_eq!(old::family_names(), family_names());
}
