//! DashScope's model list through its OpenAI-compatible mode, `GET /compatible-mode/v1/models`
//! (OpenAI's list shape). Whether that list names the speech and rerank models served on the
//! native paths is unconfirmed (see docs/providers/dashscope.md). No voice-list endpoint.

use crate::api::discovery::{Discovery, ListFns};
use crate::common::native::NativeRequest;
use crate::providers::formats::model_list;

pub(crate) const DISCOVERY: Discovery = Discovery {
    models: Some(ListFns {
        request: |_| NativeRequest::get("/compatible-mode/v1/models"),
        response: model_list::read,
    }),
    voices: None,
};
