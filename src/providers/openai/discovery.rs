//! OpenAI's model list, `GET /v1/models` (the base URL holds `/v1`): every model the key may use.
//! OpenAI has no voice-list endpoint; its voices are the capability data's.

use crate::api::discovery::{Discovery, ListFns};
use crate::common::native::NativeRequest;
use crate::providers::formats::model_list;

pub(crate) const DISCOVERY: Discovery = Discovery {
    models: Some(ListFns {
        request: |_| NativeRequest::get("/models"),
        response: model_list::read,
    }),
    voices: None,
};
