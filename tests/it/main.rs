//! Switchyard's integration tests, compiled into one test binary (`it`).
//!
//! Each module was once its own binary under `tests/`; they are modules of one crate now so that
//! `tests/it/support` and the gateway are compiled and linked once instead of once per file.
//! `cargo test --test it rerank_jina` runs one former file. The conformance suites
//! (`support::{rerank,speech,image}_conformance`) make one test per case and provider, named by
//! both: `rerank_jina::conformance::native_errors`.
//!
//! Everything here runs in one process, on parallel test threads: a test must not rely on having
//! the process to itself (no process-wide environment changes, no fixed ports, no global
//! loggers); `support` hands out loopback ports that no other test of the run receives.
//! Fixtures stay in `tests/fixtures` (the library's unit tests read them too).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

#[cfg(all(feature = "ledger", feature = "metrics"))]
mod admin;
mod auth;
mod budgets;
mod cache;
mod check_providers;
mod cli;
// The console is served by the management listener (feature ledger).
#[cfg(all(feature = "ledger", feature = "metrics"))]
mod console;
mod cost;
// A real Prometheus scrapes two gateways, one with its Redis down.
#[cfg(all(feature = "redis", feature = "metrics"))]
mod dashboards;
mod edge_clients;
mod edge_tls;
// The delegation test counts requests on the host's metrics listener.
#[cfg(feature = "metrics")]
mod embedding;
mod external_provider;
#[cfg(all(feature = "redis", feature = "metrics"))]
mod health;
mod http10;
mod image_links;
mod images;
mod images_ark;
mod images_async;
mod images_azure;
mod images_bedrock;
mod images_bfl;
mod images_dashscope;
#[cfg(feature = "multipart")]
mod images_edits;
mod images_gemini;
mod images_ideogram;
mod images_kling;
mod images_minimax;
mod images_openai;
mod images_recraft;
mod images_replicate;
mod images_siliconflow;
mod images_stability;
mod images_tencent;
mod images_together;
mod images_vertex;
mod images_zhipu;
mod inhouse_tts;
mod layers;
#[cfg(feature = "ledger")]
mod ledger;
mod lifecycle;
mod limits;
#[cfg(feature = "redis")]
mod limits_approx;
mod logs;
#[cfg(feature = "metrics")]
mod metrics;
mod models;
mod openapi;
mod properties;
#[cfg(feature = "redis")]
mod redis_ha;
#[cfg(feature = "redis")]
mod redis_recovery;
#[cfg(feature = "redis")]
mod redis_store;
#[cfg(feature = "metrics")]
mod reload;
mod rerank;
mod rerank_cohere;
mod rerank_cohere_v1;
mod rerank_compat;
mod rerank_dashscope;
mod rerank_jina;
mod rerank_local;
mod rerank_mixedbread;
// ---- rerank: NVIDIA NIM, vLLM, Infinity, Bedrock (issue 30) ----
mod rerank_bedrock;
mod rerank_infinity;
mod rerank_nim;
mod rerank_pinecone;
mod rerank_vertex;
mod rerank_vllm;
// ---- end rerank (issue 30) ----
mod rerank_siliconflow;
mod rerank_tei;
mod rerank_voyage;
mod rerank_zhipu;
#[cfg(feature = "metrics")]
mod retired_models;
mod retries;
mod routing;
#[cfg(feature = "redis")]
mod shared_files;
mod speech;
mod speech_azure;
mod speech_cartesia;
mod speech_checks;
mod speech_cosyvoice;
mod speech_cuts;
mod speech_dashscope;
mod speech_deepgram;
mod speech_elevenlabs;
mod speech_fish_audio;
mod speech_gemini;
mod speech_google;
mod speech_memory;
mod speech_minimax;
mod speech_mistral;
mod speech_openai;
mod speech_polly;
mod speech_realtime;
mod speech_stepfun;
mod speech_streaming;
mod speech_tencent;
mod speech_volcengine;
mod speech_xai;
#[cfg(feature = "redis")]
mod task_failover;
#[cfg(feature = "redis")]
mod task_store;
#[cfg(feature = "redis")]
mod task_takeover;
#[cfg(all(feature = "ledger", feature = "metrics"))]
mod tenants;
mod tracing;
mod upstream_tls;
mod usage;
mod validation;
mod voices;
