//! Tencent Hunyuan image 3.0 end to end against an emulated `aiart` API: `SubmitTextToImageJob`
//! validates the body the way Tencent documents it and starts a job, `QueryTextToImageJob` runs
//! it through "1" (waiting) → "2" (running) → "5" (done, or "4" failed) over successive queries,
//! and the finished images are served from the fake's own host. Every request's TC3 signature is
//! recomputed by the test from what the fake received (`speech_tencent::assert_tc3`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::speech_tencent::{assert_tc3, tencent_error};
use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::image_conformance::{b64, png};
use support::tasks::{finished, start};
use support::{post, TestGateway, TENCENT_SECRET_ID, TENCENT_SECRET_KEY};

const MODEL: &str = "hunyuan-image-3";
const GENERATE: &str = "/api/v1/images/generations";
const SUBMIT: &str = "SubmitTextToImageJob";
const QUERY: &str = "QueryTextToImageJob";
const VERSION: &str = "2022-12-29";

/// The fields `SubmitTextToImageJob` documents (anything else is refused, as Tencent refuses an
/// unknown parameter).
const FIELDS: &[&str] = &[
    "Prompt",
    "Images",
    "Resolution",
    "Seed",
    "LogoAdd",
    "LogoParam",
    "Revise",
];

#[derive(Clone)]
enum Outcome {
    Succeed,
    /// Status "4" with this `JobErrorCode` and `JobErrorMsg`.
    Failed(&'static str, &'static str),
}

struct Job {
    prompt: String,
    polls: u32,
}

struct State {
    queued_polls: u32,
    running_polls: u32,
    outcome: Outcome,
    jobs: HashMap<String, Job>,
    next: u64,
    submit_replies: VecDeque<Reply>,
    poll_replies: VecDeque<Reply>,
    problems: Vec<String>,
}

struct Hunyuan {
    fake: FakeProvider,
    state: Arc<Mutex<State>>,
}

impl Hunyuan {
    /// Jobs answer "1" once, "2" once, then finish.
    fn start() -> Hunyuan {
        let fake = FakeProvider::start();
        let base = fake.base_url();
        let state = Arc::new(Mutex::new(State {
            queued_polls: 1,
            running_polls: 1,
            outcome: Outcome::Succeed,
            jobs: HashMap::new(),
            next: 0,
            submit_replies: VecDeque::new(),
            poll_replies: VecDeque::new(),
            problems: Vec::new(),
        }));
        let shared = state.clone();
        fake.set_handler(move |req: &Recorded| {
            let mut s = shared.lock().unwrap();
            Some(handle(&mut s, &base, req))
        });
        Hunyuan { fake, state }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    fn calls(&self, action: &str) -> Vec<Recorded> {
        self.fake
            .requests()
            .into_iter()
            .filter(|r| r.header("x-tc-action") == Some(action))
            .collect()
    }

    /// Every API call was signed and well-formed, no download carried a credential, and the
    /// emulator saw nothing wrong.
    fn assert_clean(&self) {
        for r in self.fake.requests() {
            if r.path.starts_with("/results/") {
                assert!(r.header("authorization").is_none(), "download signed");
                continue;
            }
            let action = r.header("x-tc-action").unwrap_or_default().to_string();
            assert!(action == SUBMIT || action == QUERY, "action {action}");
            assert_tc3(&r, "aiart", &action, VERSION);
        }
        let problems = self.state().problems.clone();
        assert!(problems.is_empty(), "the emulator saw: {problems:#?}");
    }
}

fn handle(s: &mut State, base: &str, req: &Recorded) -> Reply {
    if let Some(name) = req.path.strip_prefix("/results/") {
        return Reply::bytes(200, "image/png", image_bytes(name));
    }
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    match req.header("x-tc-action") {
        Some(SUBMIT) => {
            if let Some(r) = s.submit_replies.pop_front() {
                return r;
            }
            if let Err(why) = check_submit(&body) {
                s.problems.push(format!("submit refused: {why}: {body}"));
                return tencent_error("InvalidParameter", &why);
            }
            s.next += 1;
            let id = format!("1259388371-1764399486-{:08x}-0", s.next);
            let prompt = body["Prompt"].as_str().unwrap_or_default().to_string();
            s.jobs.insert(id.clone(), Job { prompt, polls: 0 });
            Reply::json(
                200,
                json!({"Response": {"JobId": id, "RequestId": "req-submit"}}),
            )
        }
        Some(QUERY) => {
            if let Some(r) = s.poll_replies.pop_front() {
                return r;
            }
            let id = body["JobId"].as_str().unwrap_or_default().to_string();
            let (queued, running, outcome) = (s.queued_polls, s.running_polls, s.outcome.clone());
            let Some(job) = s.jobs.get_mut(&id) else {
                return tencent_error("FailedOperation.JobNotExist", "job does not exist");
            };
            job.polls += 1;
            let answer = if job.polls <= queued {
                json!({"JobStatusCode": "1", "JobStatusMsg": "排队中"})
            } else if job.polls <= queued + running {
                json!({"JobStatusCode": "2", "JobStatusMsg": "处理中"})
            } else {
                match outcome {
                    Outcome::Succeed => json!({
                        "JobStatusCode": "5",
                        "JobStatusMsg": "处理完成",
                        "JobErrorCode": "",
                        "JobErrorMsg": "",
                        "ResultImage": [format!("{base}/results/{id}.png")],
                        "ResultDetails": ["Success"],
                        "RevisedPrompt": [format!("{}, cinematic light", job.prompt)],
                    }),
                    Outcome::Failed(code, msg) => json!({
                        "JobStatusCode": "4",
                        "JobStatusMsg": "处理失败",
                        "JobErrorCode": code,
                        "JobErrorMsg": msg,
                    }),
                }
            };
            let mut answer = answer;
            answer["RequestId"] = json!("req-query");
            Reply::json(200, json!({"Response": answer}))
        }
        other => {
            s.problems.push(format!(
                "unexpected {} {} action {other:?}",
                req.method, req.path
            ));
            tencent_error("InvalidAction", "no such action")
        }
    }
}

/// Tencent's documented rules for the submit body.
fn check_submit(body: &Value) -> Result<(), String> {
    let o = body.as_object().ok_or("not an object")?;
    for k in o.keys() {
        if !FIELDS.contains(&k.as_str()) {
            return Err(format!("unknown parameter {k}"));
        }
    }
    let prompt = body["Prompt"].as_str().ok_or("Prompt missing")?;
    if prompt.is_empty() || prompt.chars().count() > 8192 {
        return Err("Prompt length".into());
    }
    if let Some(r) = body.get("Resolution") {
        let r = r.as_str().ok_or("Resolution not a string")?;
        let (w, h) = r.split_once(':').ok_or("Resolution not W:H")?;
        let (w, h): (u64, u64) = (w.parse().map_err(|_| "W")?, h.parse().map_err(|_| "H")?);
        if !(512..=2048).contains(&w) || !(512..=2048).contains(&h) || w * h > 1024 * 1024 {
            return Err(format!("Resolution {r} out of bounds"));
        }
    }
    if let Some(images) = body.get("Images") {
        let images = images.as_array().ok_or("Images not an array")?;
        if images.is_empty() || images.len() > 3 {
            return Err("1 to 3 Images".into());
        }
    }
    if let Some(l) = body.get("LogoAdd") {
        if !matches!(l.as_u64(), Some(0 | 1)) {
            return Err(format!("LogoAdd {l}"));
        }
    }
    Ok(())
}

fn image_bytes(name: &str) -> Vec<u8> {
    png(300, name.len() as u8)
}

fn generate(gw: &TestGateway, extra: Value) -> support::client::Response {
    let mut body = json!({"model": MODEL, "prompt": "a lighthouse at dusk"});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    post(gw, GENERATE, &body)
}

fn assert_no_secrets(text: &str) {
    for secret in [TENCENT_SECRET_KEY, TENCENT_SECRET_ID] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
}

// ---- round trips -----------------------------------------------------------------------------

#[test]
fn sync_round_trip_submits_one_job_and_queries_it_to_the_end() {
    let h = Hunyuan::start();
    let gw = TestGateway::start(&h.fake);
    let resp = generate(
        &gw,
        json!({"size": "1280x720", "watermark": true, "Seed": 42, "Revise": 0}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    assert_eq!(out["task_status"], "succeed");

    let submits = h.calls(SUBMIT);
    assert_eq!(submits.len(), 1);
    assert_eq!(
        submits[0].json(),
        json!({
            "Prompt": "a lighthouse at dusk",
            "Resolution": "1280:720",
            "LogoAdd": 1,
            "Seed": 42,
            "Revise": 0
        })
    );
    let id = h.state().jobs.keys().next().unwrap().clone();
    let queries = h.calls(QUERY);
    assert_eq!(queries.len(), 3, "waiting, running, done");
    for q in &queries {
        assert_eq!(q.json(), json!({"JobId": id}));
    }
    let data = out["data"].as_array().unwrap();
    assert_eq!(data.len(), 1);
    assert_eq!(
        data[0]["url"],
        format!("{}/results/{id}.png", h.fake.base_url())
    );
    assert_eq!(
        data[0]["revised_prompt"],
        "a lighthouse at dusk, cinematic light"
    );
    h.assert_clean();
    assert_no_secrets(&resp.text());
}

#[test]
fn defaults_ask_for_no_watermark_and_b64_downloads_the_image() {
    let h = Hunyuan::start();
    let gw = TestGateway::start(&h.fake);
    let resp = generate(&gw, json!({"response_format": "b64_json"}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    // Tencent marks its images unless told not to: the public default (no watermark) is sent.
    assert_eq!(
        h.calls(SUBMIT)[0].json(),
        json!({"Prompt": "a lighthouse at dusk", "Resolution": "1024:1024", "LogoAdd": 0})
    );
    let id = h.state().jobs.keys().next().unwrap().clone();
    let got =
        support::image_conformance::unb64(resp.json()["data"][0]["b64_json"].as_str().unwrap());
    assert_eq!(got, image_bytes(&format!("{id}.png")));
    h.assert_clean();
}

#[test]
fn async_round_trip() {
    let h = Hunyuan::start();
    let gw = TestGateway::start(&h.fake);
    let id = start(
        &gw,
        json!({"model": MODEL, "prompt": "a red kite", "aspect_ratio": "9:16", "async": true}),
    );
    let done = finished(&gw, &id);
    assert_eq!(done["task_status"], "succeed", "{done}");
    assert_eq!(done["data"].as_array().unwrap().len(), 1);
    assert_eq!(h.calls(SUBMIT)[0].json()["Resolution"], "720:1280");
    h.assert_clean();
}

#[test]
fn reference_images_go_as_urls_or_raw_base64() {
    let h = Hunyuan::start();
    let gw = TestGateway::start(&h.fake);
    let bytes = png(70_000, 9);
    let data_url = format!("data:image/png;base64,{}", b64(&bytes));
    let resp = generate(
        &gw,
        json!({"image": ["https://example.com/cat.png", data_url]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let body = h.calls(SUBMIT)[0].json();
    assert_eq!(
        body["Images"],
        json!(["https://example.com/cat.png", b64(&bytes)])
    );
    h.assert_clean();
}

#[test]
fn what_the_model_cannot_take_is_refused_before_sending() {
    let h = Hunyuan::start();
    let gw = TestGateway::start(&h.fake);
    let four = json!([
        "https://e.com/1.png",
        "https://e.com/2.png",
        "https://e.com/3.png",
        "https://e.com/4.png"
    ]);
    let cases = [
        ("n", json!({"n": 2})),
        ("negative_prompt", json!({"negative_prompt": "fog"})),
        ("size", json!({"size": "1024x1536"})),
        ("size", json!({"size": "2048x2048"})),
        ("quality", json!({"quality": "hd"})),
        ("image", json!({"image": four})),
        ("NegativePrompt", json!({"NegativePrompt": "fog"})),
    ];
    for (field, extra) in cases {
        let resp = generate(&gw, extra.clone());
        assert_eq!(resp.status, 400, "{extra}: {}", resp.text());
        let details = resp.json()["details"].clone();
        assert!(
            details.get(field).is_some() || resp.text().contains(field),
            "{extra}: {details}"
        );
    }
    assert!(h.fake.requests().is_empty());
}

// ---- errors ----------------------------------------------------------------------------------

fn public(resp: &support::client::Response) -> (u16, String) {
    (
        resp.status,
        resp.json()["code"].as_str().unwrap_or_default().to_string(),
    )
}

#[test]
fn submit_errors_map_to_public_errors() {
    let h = Hunyuan::start();
    let gw = TestGateway::start(&h.fake);
    let cases = [
        (
            tencent_error(
                "AuthFailure.SignatureFailure",
                "The provided credentials could not be validated.",
            ),
            502,
            "upstream_auth_failed",
        ),
        (
            tencent_error(
                "OperationDenied.TextIllegalDetected",
                "文本包含违法违规信息",
            ),
            400,
            "content_policy_violation",
        ),
        (
            tencent_error("InvalidParameterValue.TextLengthExceed", "Prompt too long"),
            400,
            "invalid_request",
        ),
        (
            tencent_error(
                "ResourceUnavailable.InArrears",
                "The account is in arrears.",
            ),
            502,
            "upstream_error",
        ),
        (
            tencent_error(
                "RequestLimitExceeded.JobNumExceed",
                "Too many jobs at once.",
            ),
            429,
            "rate_limited",
        ),
    ];
    for (reply, status, code) in cases {
        h.state().submit_replies.push_back(reply);
        let resp = generate(&gw, json!({}));
        assert_eq!(public(&resp), (status, code.to_string()), "{}", resp.text());
        assert_no_secrets(&resp.text());
    }
    assert!(h.calls(QUERY).is_empty());
    h.assert_clean();
}

#[test]
fn failures_inside_a_200_are_retried() {
    let h = Hunyuan::start();
    let gw = TestGateway::start(&h.fake);
    {
        let mut s = h.state();
        s.submit_replies
            .push_back(tencent_error("RequestLimitExceeded", "too many requests"));
        s.submit_replies
            .push_back(tencent_error("InternalError", "internal error"));
    }
    let resp = generate(&gw, json!({"retries": 2}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    let submits = h.calls(SUBMIT);
    assert_eq!(submits.len(), 3);
    // Each attempt is signed anew (the time may differ), with the same body.
    assert_eq!(submits[0].body, submits[2].body);
    h.assert_clean();
}

#[test]
fn failed_jobs_end_the_wait_with_their_reason() {
    let h = Hunyuan::start();
    h.state().outcome = Outcome::Failed(
        "OperationDenied.ImageIllegalDetected",
        "图片包含违法违规信息",
    );
    let gw = TestGateway::start(&h.fake);
    let resp = generate(&gw, json!({"retries": 2}));
    assert_eq!(
        public(&resp),
        (400, "content_policy_violation".into()),
        "{}",
        resp.text()
    );
    assert!(resp.text().contains("ImageIllegalDetected"));
    assert_eq!(h.calls(SUBMIT).len(), 1, "a failed job is not resubmitted");

    h.state().outcome = Outcome::Failed("FailedOperation.GenerateImageFailed", "生成图片失败");
    let id = start(&gw, json!({"model": MODEL, "prompt": "p", "async": true}));
    let done = finished(&gw, &id);
    assert_eq!(done["task_status"], "failed");
    assert_eq!(done["error"]["code"], "upstream_error");
    h.assert_clean();
}

#[test]
fn a_job_tencent_no_longer_knows_is_not_queried_again() {
    let h = Hunyuan::start();
    let gw = TestGateway::start(&h.fake);
    h.state().poll_replies.push_back(tencent_error(
        "FailedOperation.JobNotExist",
        "job does not exist",
    ));
    let resp = generate(&gw, json!({}));
    assert_eq!(public(&resp).1, "upstream_error", "{}", resp.text());
    assert_eq!(h.calls(QUERY).len(), 1);
    h.assert_clean();
}
