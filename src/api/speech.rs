//! `POST /api/v1/audio/speech`: the request, its validation against the model's capabilities.

use std::sync::Arc;

use serde_json::value::RawValue;

use crate::api::common;
use crate::api::voices;
use crate::caps::{Caps, SpeechCaps};
use crate::catalog::{one_of, Catalog, Model};
use crate::common::error::GatewayError;
use crate::common::json::{Fields, Str};
use crate::common::Operation;

/// Every public `response_format` the gateway knows.
pub use crate::caps::schema::SPEECH_FORMATS as FORMATS;
/// Public speeds (spec: one of 0.25, 0.5, 1, 2, 4).
pub use crate::caps::schema::SPEEDS;

/// A validated speech request; strings borrow from the request body.
#[derive(Debug)]
pub struct SpeechRequest<'a> {
    /// The public model asked for (its name, capabilities and targets).
    #[doc(hidden)]
    pub model: Arc<Model>,
    /// The model's capabilities, which the request was validated against.
    #[doc(hidden)]
    pub caps: &'static SpeechCaps,
    /// The text to speak, decoded.
    pub input: Str<'a>,
    /// The caller's voice, or the model's default: a voice name, or a custom voice's id.
    pub voice: Str<'a>,
    /// `voice` is the model's default, filled in by the gateway (the caller named none): a
    /// provider refusing it refuses the operator's configuration, not the caller's request.
    pub default_voice: bool,
    /// `voice` is a custom voice's id, given as `{"id": …}` (only for models with
    /// `custom_voices`); adapters send it in that shape.
    pub custom_voice: bool,
    /// The audio format asked for (`mp3`, `opus`, `aac`, `flac`, `wav`, `pcm`).
    pub response_format: &'static str,
    /// `stream_format: sse`: the audio is answered as SSE events.
    pub sse: bool,
    /// Speed, one of the family's `speeds` (1 when the caller named none).
    pub speed: f64,
    /// Voice instructions (only for families with `instructions`).
    pub instructions: Option<Str<'a>>,
    /// Retries the caller allows (already bounded by the configuration's `retries.max`).
    pub retries: u32,
    /// Undeclared fields the model takes natively, copied verbatim.
    pub passthrough: Vec<(Str<'a>, &'a RawValue)>,
}

/// The `Content-Type` of audio in a public format.
pub fn content_type(format: &str) -> &'static str {
    match format {
        "mp3" => "audio/mpeg",
        "opus" => "audio/opus",
        "aac" => "audio/aac",
        "flac" => "audio/flac",
        "wav" => "audio/wav",
        _ => "audio/pcm",
    }
}

/// Parse and validate a speech request body.
pub fn parse<'a>(
    body: &'a [u8],
    catalog: &Catalog,
    max_retries: u32,
) -> Result<SpeechRequest<'a>, GatewayError> {
    let mut f = Fields::parse(body)?;
    let model = common::model(&mut f, catalog, Operation::Speech);
    let caps = match model.as_ref().map(|m| m.caps) {
        Some(Caps::Speech(c)) => Some(c),
        _ => None,
    };
    let input = f.required_string("input");
    let (voice, custom_voice) = read_voice(&mut f);
    let response_format = f.string("response_format");
    let stream_format = f.string("stream_format");
    let speed = f.number("speed");
    let instructions = f.string("instructions");
    let retries = common::retries(&mut f, max_retries);

    let wants_sse = stream_format.as_ref().is_some_and(|s| s.as_str() == "sse");
    let response_format = audio_format(&mut f, caps, &model, response_format, wants_sse);
    let stream_format = stream_format.as_ref().map(|s| s.as_str());
    let sse = sse(&mut f, caps, &model, stream_format, response_format);
    let speed = self::speed(&mut f, caps, &model, speed);
    if let (Some(_), Some(c)) = (&instructions, caps) {
        if !c.instructions {
            f.error(
                "instructions",
                format!("model {} does not support instructions", model_name(&model)),
            );
        }
    }
    if let Some(c) = caps {
        check_voice(&mut f, c, &model, voice.as_ref(), custom_voice);
    }

    let (rest, mut errors) = f.into_rest();
    let native = caps.map(|c| c.native_fields).unwrap_or(&[]);
    let passthrough = common::undeclared(rest, native, model.as_deref(), &mut errors);
    errors.into_result()?;

    // Every `None` below was recorded as an error above, so these only fail on a bug.
    let (Some(model), Some(caps), Some(input)) = (model, caps, input) else {
        return Err(GatewayError::Internal(
            "speech validation incomplete".into(),
        ));
    };
    within_limits(&model, caps, &input)?;
    // The model's own default when it has one in the config, which is part of its capabilities.
    let default_voice = voice.is_none();
    let voice = voice.unwrap_or(Str(std::borrow::Cow::Borrowed(
        caps.default_voice.unwrap_or_default(),
    )));
    // A name the operator maps (`voice_map`) goes to the provider as the voice it stands for.
    let voice = if custom_voice {
        voice
    } else {
        voices::resolve(&model, voice)
    };
    Ok(SpeechRequest {
        model,
        caps,
        input,
        voice,
        default_voice,
        custom_voice,
        response_format,
        sse,
        speed,
        instructions,
        retries,
        passthrough,
    })
}

/// `response_format`: one of the public formats the model produces. Default `mp3`; a model that
/// cannot produce it defaults to its own first format (the first it can stream, for SSE), rather
/// than failing a request that named no format at all.
fn audio_format(
    f: &mut Fields<'_>,
    caps: Option<&'static SpeechCaps>,
    model: &Option<Arc<Model>>,
    value: Option<Str<'_>>,
    wants_sse: bool,
) -> &'static str {
    let Some(v) = value else {
        return match caps {
            Some(c) if wants_sse && !c.sse_formats.contains(&"mp3") => {
                c.sse_formats.first().copied().unwrap_or("mp3")
            }
            Some(c) if !c.formats.contains(&"mp3") => c.formats.first().copied().unwrap_or("mp3"),
            _ => "mp3",
        };
    };
    let Some(fmt) = FORMATS.iter().find(|x| **x == v.as_str()) else {
        f.error(
            "response_format",
            format!("must be one of {}", FORMATS.join(", ")),
        );
        return "mp3";
    };
    if let Some(c) = caps {
        if !c.formats.contains(fmt) {
            f.error(
                "response_format",
                format!(
                    "model {} cannot produce `{fmt}`; it offers: {}",
                    model_name(model),
                    c.formats.join(", ")
                ),
            );
        }
    }
    fmt
}

/// `stream_format`: `audio` (the default) or `sse`, which the model must stream
/// `response_format` as.
fn sse(
    f: &mut Fields<'_>,
    caps: Option<&'static SpeechCaps>,
    model: &Option<Arc<Model>>,
    stream_format: Option<&str>,
    response_format: &str,
) -> bool {
    match stream_format {
        None | Some("audio") => false,
        Some("sse") => {
            if let Some(c) = caps {
                if c.sse_formats.is_empty() {
                    f.error(
                        "stream_format",
                        format!(
                            "model {} cannot stream as SSE; use `audio`",
                            model_name(model)
                        ),
                    );
                } else if c.formats.contains(&response_format)
                    && !c.sse_formats.contains(&response_format)
                {
                    f.error(
                        "response_format",
                        format!(
                            "model {} cannot stream `{response_format}` as SSE; it streams: {}",
                            model_name(model),
                            c.sse_formats.join(", ")
                        ),
                    );
                }
            }
            true
        }
        Some(_) => {
            f.error("stream_format", "must be `audio` or `sse`");
            false
        }
    }
}

/// `speed`: a public speed the model takes (1 when none is given).
fn speed(
    f: &mut Fields<'_>,
    caps: Option<&'static SpeechCaps>,
    model: &Option<Arc<Model>>,
    speed: Option<f64>,
) -> f64 {
    match speed {
        None => 1.0,
        Some(s) if !SPEEDS.contains(&s) => {
            f.error("speed", format!("must be one of {}", one_of(SPEEDS)));
            1.0
        }
        Some(s) => {
            if let Some(c) = caps {
                if !c.speeds.contains(&s) {
                    f.error(
                        "speed",
                        format!(
                            "model {} accepts only speeds {}",
                            model_name(model),
                            one_of(c.speeds)
                        ),
                    );
                }
            }
            s
        }
    }
}

/// `voice`: given unless the model has a default; not empty; a custom voice only where the model
/// takes them; else one of the model's voices (or one the operator maps).
fn check_voice(
    f: &mut Fields<'_>,
    c: &SpeechCaps,
    model: &Option<Arc<Model>>,
    voice: Option<&Str<'_>>,
    custom_voice: bool,
) {
    let Some(v) = voice else {
        if c.default_voice.is_none() {
            // The configuration names no default voice for this model (a load-time requirement
            // where its account is usable, so only a model without a usable target gets here).
            f.error(
                "voice",
                format!(
                    "model {} has no default voice: name a voice",
                    model_name(model)
                ),
            );
        }
        return;
    };
    if v.as_str().trim().is_empty() {
        f.error("voice", "must not be empty");
    } else if custom_voice {
        if !c.custom_voices {
            f.error(
                "voice",
                format!(
                    "model {} takes a voice name (a string), not a custom voice",
                    model_name(model)
                ),
            );
        }
    } else if let Some(m) = model
        .as_deref()
        .filter(|_| !c.voices.is_empty() && !c.voices.contains(&v.as_str()))
        .filter(|m| !voices::is_mapped(m, v.as_str()))
    {
        f.error(
            "voice",
            format!("model {} accepts: {}", m.name, voices::accepted(m, c)),
        );
    }
}

/// Each bound the model has on `input` (characters or bytes, and for some models tokens too).
fn within_limits(model: &Model, caps: &SpeechCaps, input: &Str<'_>) -> Result<(), GatewayError> {
    for limit in std::iter::once(caps.input_limit).chain(caps.input_token_limit) {
        if let Some(length) = common::over_limit(input.as_str(), limit) {
            return Err(GatewayError::InputTooLong {
                model: model.name.clone(),
                length,
                unit: limit.unit.as_str(),
                limit: limit.max,
            });
        }
    }
    Ok(())
}

/// `voice`: a name (a string), or a custom voice `{"id": "voice_…"}` (the id, and `true`).
fn read_voice<'a>(f: &mut Fields<'a>) -> (Option<Str<'a>>, bool) {
    let Some(raw) = f.take_raw("voice") else {
        return (None, false);
    };
    if let Ok(name) = serde_json::from_str::<Str<'a>>(raw.get()) {
        return (Some(name), false);
    }
    let custom = Fields::nested(raw, "voice").ok().and_then(|mut object| {
        let id = object.string("id");
        let (rest, errors) = object.into_rest();
        id.filter(|_| rest.is_empty() && errors.into_result().is_ok())
    });
    match custom {
        Some(id) => (Some(id), true),
        None => {
            f.error(
                "voice",
                "must be a voice name (a string) or a custom voice {\"id\": \"voice_…\"}",
            );
            (None, false)
        }
    }
}

fn model_name(m: &Option<Arc<Model>>) -> &str {
    m.as_ref().map(|m| m.name.as_str()).unwrap_or("")
}
