//! Kling images end to end against an emulated Kling: a task API that checks every request's
//! signed token (HS256 with the account's secret key, `iss` = its access key, about 30 minutes of
//! validity), validates the submit body the way Kling documents it, runs each task through
//! `submitted` → `processing` → `succeed` (or `failed`) over successive polls, and serves the
//! finished images from its own host.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::support;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::image_conformance::{b64, png, unb64};
use support::tasks::{finished, start, task};
use support::{post, TestGateway, KEY, KLING_ACCESS_KEY, KLING_SECRET_KEY, PROVIDER_KEY};

const SUBMIT: &str = "/v1/images/generations";
const MODEL: &str = "kling-v2-1";
const GENERATE: &str = "/api/v1/images/generations";

/// Kling's token lifetime: `exp` is this far after signing.
const TOKEN_LIFETIME: u64 = 1800;
/// How long before a check a token may have been signed (one gateway lives for one test).
const TOKEN_AGE_LIMIT: u64 = 120;

/// Fields Kling's image API documents (anything else is refused, as Kling refuses unknown input).
const KLING_FIELDS: &[&str] = &[
    "model_name",
    "prompt",
    "negative_prompt",
    "image",
    "image_reference",
    "image_fidelity",
    "human_fidelity",
    "resolution",
    "n",
    "aspect_ratio",
    "callback_url",
    "external_task_id",
    "watermark_info",
];
const KLING_RATIOS: &[&str] = &["16:9", "9:16", "1:1", "4:3", "3:4", "3:2", "2:3", "21:9"];
/// The models Kling's image endpoint serves (anything else: code 1203, no such model).
const KLING_MODELS: &[&str] = &[
    "kling-v1",
    "kling-v1-5",
    "kling-v2",
    "kling-v2-new",
    "kling-v2-1",
];

// ---- the emulator ----------------------------------------------------------------------------

/// How an emulated task ends.
#[derive(Clone, Debug)]
enum Outcome {
    Succeed,
    /// `failed` with this `task_status_msg`.
    Failed(String),
}

/// A state the test holds every task in until it lets go (`None`: tasks move on by poll counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hold {
    Submitted,
    Processing,
}

struct Task {
    n: u64,
    /// Asked with `watermark_info.enabled`: the answer carries watermarked copies too.
    watermark: bool,
    polls: u32,
    created_at: i64,
    outcome: Outcome,
}

struct State {
    /// Polls answered `submitted`, then `processing`, before a task ends.
    queued_polls: u32,
    running_polls: u32,
    outcome: Outcome,
    hold: Option<Hold>,
    tasks: HashMap<String, Task>,
    next: u64,
    /// Scripted answers taken by the next submits / polls instead of the emulation.
    submit_replies: VecDeque<Reply>,
    poll_replies: VecDeque<Reply>,
    /// What the emulator found wrong (tokens, bodies, credentials); a test asserts it is empty.
    problems: Vec<String>,
}

/// A fake Kling, and the emulation state the test steers and inspects.
struct Kling {
    fake: FakeProvider,
    state: Arc<Mutex<State>>,
}

impl Kling {
    /// Tasks answer `submitted` twice, `processing` twice, then succeed.
    fn start() -> Kling {
        let fake = FakeProvider::start();
        let base = fake.base_url();
        let state = Arc::new(Mutex::new(State {
            queued_polls: 2,
            running_polls: 2,
            outcome: Outcome::Succeed,
            hold: None,
            tasks: HashMap::new(),
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
        Kling { fake, state }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    fn submits(&self) -> Vec<Recorded> {
        self.fake
            .requests()
            .into_iter()
            .filter(|r| r.method == "POST" && r.path == SUBMIT)
            .collect()
    }

    fn polls(&self) -> Vec<Recorded> {
        let prefix = format!("{SUBMIT}/");
        self.fake
            .requests()
            .into_iter()
            .filter(|r| r.method == "GET" && r.path.starts_with(&prefix))
            .collect()
    }

    fn downloads(&self) -> Vec<Recorded> {
        self.fake
            .requests()
            .into_iter()
            .filter(|r| r.path.starts_with("/results/"))
            .collect()
    }

    /// Every request carried a valid token and a body Kling accepts; no caller credential.
    fn assert_clean(&self) {
        let problems = self.state().problems.clone();
        assert!(
            problems.is_empty(),
            "the emulator saw problems: {problems:#?}"
        );
    }
}

/// Answer one request as Kling would.
fn handle(s: &mut State, base: &str, req: &Recorded) -> Reply {
    // Result files are public links: fetched without any credential.
    if let Some(rest) = req.path.strip_prefix("/results/") {
        for h in ["authorization", "x-key", "api-key", "service-api-key"] {
            if req.header(h).is_some() {
                s.problems
                    .push(format!("download {} carried {h}", req.path));
            }
        }
        return match parse_result_path(rest) {
            Some((id, index)) if s.tasks.contains_key(&id) => {
                Reply::bytes(200, "image/png", image_bytes(&id, index))
            }
            _ => Reply::bytes(404, "text/plain", b"no such file".to_vec()),
        };
    }
    for (name, value) in &req.headers {
        if name == "service-api-key" || value.contains(KEY) || value.contains(PROVIDER_KEY) {
            s.problems.push(format!(
                "{} {} carried a foreign credential in {name}",
                req.method, req.path
            ));
        }
    }
    if let Err(why) = verify_token(req) {
        s.problems
            .push(format!("{} {}: bad token: {why}", req.method, req.path));
        return kling_error(401, 1002, "Authorization is invalid");
    }
    if req.method == "POST" && req.path == SUBMIT {
        if let Some(reply) = s.submit_replies.pop_front() {
            return reply;
        }
        return submit(s, req);
    }
    if req.method == "GET" {
        if let Some(id) = req.path.strip_prefix(&format!("{SUBMIT}/")) {
            if let Some(reply) = s.poll_replies.pop_front() {
                return reply;
            }
            return poll(s, base, id);
        }
    }
    s.problems
        .push(format!("unexpected request {} {}", req.method, req.path));
    kling_error(404, 1202, "invalid request method or path")
}

#[derive(serde::Deserialize)]
struct Claims {
    iss: String,
    exp: u64,
    nbf: u64,
}

/// The request's `Authorization: Bearer <JWT>`: HS256 with the secret key, issued by the access
/// key, valid now and for about 30 minutes from when it was signed.
fn verify_token(req: &Recorded) -> Result<(), String> {
    let value = req.header("authorization").ok_or("no Authorization")?;
    let token = value
        .strip_prefix("Bearer ")
        .ok_or_else(|| format!("not a Bearer token: {value}"))?;
    let mut validation = Validation::new(Algorithm::HS256);
    validation.set_issuer(&[KLING_ACCESS_KEY]);
    validation.set_required_spec_claims(&["exp", "nbf", "iss"]);
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.leeway = 0;
    let data = jsonwebtoken::decode::<Claims>(
        token,
        &DecodingKey::from_secret(KLING_SECRET_KEY.as_bytes()),
        &validation,
    )
    .map_err(|e| format!("does not verify: {e}"))?;
    if data.header.typ.as_deref() != Some("JWT") {
        return Err(format!("header typ {:?}", data.header.typ));
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let c = data.claims;
    if c.iss != KLING_ACCESS_KEY {
        return Err(format!("iss {}", c.iss));
    }
    if c.nbf > now || c.nbf + TOKEN_AGE_LIMIT < now {
        return Err(format!("nbf {} for now {now}", c.nbf));
    }
    // Signed at most TOKEN_AGE_LIMIT ago (a second of clock rounding allowed the other way).
    if c.exp > now + TOKEN_LIFETIME + 1 || c.exp + TOKEN_AGE_LIMIT < now + TOKEN_LIFETIME {
        return Err(format!("exp {} is not about now + 1800 ({now})", c.exp));
    }
    Ok(())
}

/// Create a task from a submit body Kling accepts; refuse the rest as Kling does (code 1201).
fn submit(s: &mut State, req: &Recorded) -> Reply {
    if req.header("content-type") != Some("application/json") {
        s.problems.push("submit is not JSON".into());
        return kling_error(400, 1200, "invalid content type");
    }
    let body: Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(_) => return kling_error(400, 1200, "body is not JSON"),
    };
    let model = body["model_name"].as_str().unwrap_or_default();
    if !model.is_empty() && !KLING_MODELS.contains(&model) {
        return kling_error(404, 1203, &format!("model {model} is not found"));
    }
    if let Err(why) = check_submit(&body) {
        s.problems.push(format!("submit refused: {why}: {body}"));
        return kling_error(400, 1201, &why);
    }
    s.next += 1;
    let id = (822_953_089_408_827_000_u64 + s.next).to_string();
    let created_at = 1_764_235_825_029 + s.next as i64 * 1000;
    let n = body["n"].as_u64().unwrap_or(1);
    let watermark = body["watermark_info"]["enabled"] == true;
    s.tasks.insert(
        id.clone(),
        Task {
            n,
            watermark,
            polls: 0,
            created_at,
            outcome: s.outcome.clone(),
        },
    );
    Reply::json(
        200,
        envelope(json!({
            "task_id": id,
            "task_status": "submitted",
            "task_info": {},
            "created_at": created_at,
            "updated_at": created_at
        })),
    )
}

/// Kling's documented rules for the submit body.
fn check_submit(body: &Value) -> Result<(), String> {
    let o = body.as_object().ok_or("not an object")?;
    for k in o.keys() {
        if !KLING_FIELDS.contains(&k.as_str()) {
            return Err(format!("unknown field {k}"));
        }
    }
    if o.contains_key("callback_url") {
        return Err("callback_url sent: the gateway polls".into());
    }
    if body["model_name"].as_str().is_none_or(|m| m.is_empty()) {
        return Err("model_name missing".into());
    }
    let prompt = body["prompt"].as_str().ok_or("prompt missing")?;
    if prompt.is_empty() || prompt.chars().count() > 2500 {
        return Err("prompt length".into());
    }
    if let Some(n) = body.get("n") {
        if !n.as_u64().is_some_and(|n| (1..=9).contains(&n)) {
            return Err(format!("n {n} outside [1, 9]"));
        }
    }
    if let Some(r) = body.get("aspect_ratio") {
        if !r.as_str().is_some_and(|r| KLING_RATIOS.contains(&r)) {
            return Err(format!("aspect_ratio {r}"));
        }
    }
    if let Some(r) = body.get("resolution") {
        if r != "1k" && r != "2k" {
            return Err(format!("resolution {r}"));
        }
    }
    // What each model takes (Kling's capability map for `/v1/images/generations`).
    let model = body["model_name"].as_str().unwrap_or_default();
    let v1 = model == "kling-v1";
    let v1_5 = model == "kling-v1-5";
    if (v1 || v1_5) && body.get("resolution").is_some_and(|r| r == "2k") {
        return Err(format!("{model} makes 1k images only"));
    }
    if v1 && body.get("aspect_ratio").is_some_and(|r| r == "21:9") {
        return Err("kling-v1 has no 21:9".into());
    }
    if body.get("image").is_some() && !(v1 || v1_5) {
        return Err(format!("{model} takes no image on this endpoint"));
    }
    if let Some(kind) = body.get("image_reference") {
        if !v1_5 {
            return Err(format!("{model} takes no image_reference"));
        }
        if kind != "subject" && kind != "face" {
            return Err(format!("image_reference {kind}"));
        }
        if body.get("image").is_none() {
            return Err("image_reference without image".into());
        }
    } else if v1_5 && body.get("image").is_some() {
        return Err("kling-v1-5 needs image_reference with image".into());
    }
    if let Some(w) = body.get("watermark_info") {
        if !w
            .as_object()
            .is_some_and(|o| o.len() == 1 && o["enabled"].is_boolean())
        {
            return Err(format!("watermark_info {w}"));
        }
    }
    if let Some(image) = body.get("image") {
        let image = image.as_str().ok_or("image is not a string")?;
        if body.get("negative_prompt").is_some() {
            return Err("negative_prompt is not supported with image".into());
        }
        if image.starts_with("data:") {
            return Err("image base64 must not carry a data: prefix".into());
        }
        if !image.starts_with("http") && unb64_checked(image).is_none() {
            return Err("image is neither a URL nor base64".into());
        }
    }
    for f in ["image_fidelity", "human_fidelity"] {
        if let Some(v) = body.get(f) {
            if !v.as_f64().is_some_and(|v| (0.0..=1.0).contains(&v)) {
                return Err(format!("{f} outside [0, 1]"));
            }
            if body.get("image").is_none() {
                return Err(format!("{f} without image"));
            }
        }
    }
    Ok(())
}

fn unb64_checked(s: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).ok()
}

/// One poll of task `id`: its state moves on by poll counts unless the test holds it.
fn poll(s: &mut State, base: &str, id: &str) -> Reply {
    let (queued, running, hold) = (s.queued_polls, s.running_polls, s.hold);
    let Some(t) = s.tasks.get_mut(id) else {
        return kling_error(404, 1203, "task not found");
    };
    t.polls += 1;
    let status = match hold {
        Some(Hold::Submitted) => "submitted",
        Some(Hold::Processing) => "processing",
        None if t.polls <= queued => "submitted",
        None if t.polls <= queued + running => "processing",
        None => match t.outcome {
            Outcome::Succeed => "succeed",
            Outcome::Failed(_) => "failed",
        },
    };
    let mut data = json!({
        "task_id": id,
        "task_status": status,
        "task_status_msg": "",
        "task_info": {},
        "created_at": t.created_at,
        "updated_at": t.created_at + 5000 * i64::from(t.polls),
        "task_result": {}
    });
    match (status, &t.outcome) {
        ("succeed", _) => {
            // Listed last index first: the gateway must order them by `index`.
            let watermark = t.watermark;
            let images: Vec<Value> = (0..t.n)
                .rev()
                .map(|i| {
                    let mut image = json!({"index": i, "url": result_url(base, id, i)});
                    if watermark {
                        image["watermark_url"] = json!(watermarked_url(base, id, i));
                    }
                    image
                })
                .collect();
            data["task_result"] = json!({"images": images});
            data["watermark_info"] = json!({"enabled": watermark});
            data["final_unit_deduction"] = json!(t.n.to_string());
        }
        ("failed", Outcome::Failed(msg)) => data["task_status_msg"] = json!(msg),
        _ => {}
    }
    Reply::json(200, envelope(data))
}

fn envelope(data: Value) -> Value {
    json!({"code": 0, "message": "SUCCEED", "request_id": "0f4b6a2e-kling-req", "data": data})
}

/// Kling's error envelope with HTTP `status`.
fn kling_error(status: u16, code: u32, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"code": code, "message": message, "request_id": "9a1c-kling-err"}),
    )
}

fn result_url(base: &str, id: &str, index: u64) -> String {
    format!("{base}/results/{id}/{index}.png")
}

fn watermarked_url(base: &str, id: &str, index: u64) -> String {
    format!("{base}/results/{id}/{index}-wm.png")
}

fn parse_result_path(rest: &str) -> Option<(String, u64)> {
    let (id, file) = rest.split_once('/')?;
    Some((id.to_string(), file.strip_suffix(".png")?.parse().ok()?))
}

/// The bytes of image `index` of task `id`: distinct for every task and index.
fn image_bytes(id: &str, index: u64) -> Vec<u8> {
    let seed = id
        .bytes()
        .fold(0u8, |a, b| a.wrapping_mul(31).wrapping_add(b));
    png(3000 + index as usize * 7, seed.wrapping_add(index as u8))
}

// ---- helpers ---------------------------------------------------------------------------------

fn generate(gw: &TestGateway, extra: Value) -> support::client::Response {
    let mut body = json!({"model": MODEL, "prompt": "a lighthouse at dusk"});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    post(gw, GENERATE, &body)
}

/// The id of the only task the emulator created.
fn only_task(k: &Kling) -> String {
    let s = k.state();
    assert_eq!(s.tasks.len(), 1, "tasks created");
    s.tasks.keys().next().unwrap().clone()
}

/// The public error answer: `(status, code, message)`.
fn public_error(resp: &support::client::Response) -> (u16, String, String) {
    let body = resp.json();
    (
        resp.status,
        body["code"].as_str().unwrap_or_default().to_string(),
        body["message"].as_str().unwrap_or_default().to_string(),
    )
}

fn assert_no_secrets(text: &str) {
    for secret in [KLING_SECRET_KEY, KLING_ACCESS_KEY, PROVIDER_KEY] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
    assert!(!text.contains("Bearer"), "a token leaked: {text}");
}

/// Read the public task until it shows `state` (meanwhile it may only be pending or running);
/// returns that reading.
fn wait_for_state(gw: &TestGateway, id: &str, state: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let resp = task(gw, id, KEY);
        assert_eq!(resp.status, 200, "{}", resp.text());
        let body = resp.json();
        if body["task_status"] == state {
            return body;
        }
        assert!(
            body["task_status"] == "pending" || body["task_status"] == "running",
            "waiting for {state}: {body}"
        );
        assert!(
            Instant::now() < deadline,
            "task {id} never showed {state}: {body}"
        );
        std::thread::park_timeout(Duration::from_millis(10));
    }
}

// ---- round trips -----------------------------------------------------------------------------

#[test]
fn sync_round_trip_makes_three_images_in_one_task() {
    let k = Kling::start();
    let gw = TestGateway::start(&k.fake);
    let resp = generate(
        &gw,
        json!({"n": 3, "size": "1280x720", "quality": "pro", "negative_prompt": "fog"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    assert_eq!(out["task_status"], "succeed");
    assert!(uuid::Uuid::parse_str(out["task_id"].as_str().unwrap()).is_ok());

    // One native task for all three images, asked for in Kling's terms.
    let submits = k.submits();
    assert_eq!(submits.len(), 1);
    assert_eq!(
        submits[0].json(),
        json!({
            "model_name": "kling-v2-1",
            "prompt": "a lighthouse at dusk",
            "negative_prompt": "fog",
            "resolution": "2k",
            "n": 3,
            "aspect_ratio": "16:9"
        })
    );
    let id = only_task(&k);
    let created_at = k.state().tasks[&id].created_at;
    assert_eq!(out["created"], created_at / 1000);

    // The provider's links, in index order, passed through.
    let urls: Vec<&str> = out["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["url"].as_str().unwrap())
        .collect();
    let base = k.fake.base_url();
    let expected: Vec<String> = (0..3).map(|i| result_url(&base, &id, i)).collect();
    assert_eq!(urls, expected);
    assert!(out["data"][0].get("b64_json").is_none());

    // Polled through submitted (2) and processing (2) to succeed, then no more.
    let polls = k.polls();
    assert_eq!(polls.len(), 5, "polls");
    for p in &polls {
        assert_eq!(p.path, format!("{SUBMIT}/{id}"));
        assert!(p.body.is_empty());
    }
    assert!(k.downloads().is_empty(), "url answers need no download");
    k.assert_clean();
    assert_no_secrets(&resp.text());
}

#[test]
fn b64_json_downloads_the_images_from_the_provider_host() {
    let k = Kling::start();
    let gw = TestGateway::start(&k.fake);
    let resp = generate(
        &gw,
        json!({"n": 2, "aspect_ratio": "3:4", "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    let id = only_task(&k);
    let data = out["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    for (i, item) in data.iter().enumerate() {
        assert!(item.get("url").is_none());
        assert_eq!(
            unb64(item["b64_json"].as_str().unwrap()),
            image_bytes(&id, i as u64),
            "image {i}"
        );
    }
    assert_eq!(k.submits()[0].json()["aspect_ratio"], "3:4");
    let downloads = k.downloads();
    assert_eq!(downloads.len(), 2, "one download per image");
    for d in &downloads {
        assert_eq!(d.method, "GET");
        assert!(
            d.header("authorization").is_none(),
            "download carried the token"
        );
    }
    k.assert_clean();
}

#[test]
fn async_round_trip_shows_the_task_progress_then_the_images() {
    let k = Kling::start();
    k.state().hold = Some(Hold::Submitted);
    let gw = TestGateway::start(&k.fake);
    let public_id = start(
        &gw,
        json!({"model": MODEL, "prompt": "a fox", "n": 2, "async": true, "aspect_ratio": "9:16"}),
    );

    // Kling has the task queued (`submitted`): the public task is `pending`.
    k.fake.wait_requests(1, Duration::from_secs(10));
    let id = only_task(&k);
    let queued = wait_for_state(&gw, &public_id, "pending");
    assert_eq!(queued["data"], json!([]));
    assert!(queued.get("error").is_none());

    // Kling is generating (`processing`): running.
    k.state().hold = Some(Hold::Processing);
    wait_for_state(&gw, &public_id, "running");

    // Done: the images, in order.
    {
        let mut s = k.state();
        s.hold = None;
        s.queued_polls = 0;
        s.running_polls = 0;
    }
    let done = finished(&gw, &public_id);
    assert_eq!(done["task_status"], "succeed", "{done}");
    assert!(done.get("error").is_none());
    let base = k.fake.base_url();
    assert_eq!(
        done["data"],
        json!([{"url": result_url(&base, &id, 0)}, {"url": result_url(&base, &id, 1)}])
    );
    assert_eq!(k.submits().len(), 1);
    let sent = k.submits()[0].json();
    assert_eq!(sent["n"], 2);
    assert_eq!(sent["aspect_ratio"], "9:16");
    assert!(sent.get("async").is_none());
    // Every poll of the one native task, none after the images.
    let polls = k.polls();
    assert!(polls.len() >= 2, "{} polls", polls.len());
    assert!(polls.iter().all(|p| p.path == format!("{SUBMIT}/{id}")));
    let last = k.state().tasks[&id].polls;
    assert_eq!(polls.len() as u32, last);
    k.assert_clean();
}

// ---- failed tasks ----------------------------------------------------------------------------

#[test]
fn a_moderated_task_is_a_content_policy_violation() {
    let k = Kling::start();
    k.state().outcome = Outcome::Failed("Failure to pass the risk control system".into());
    let gw = TestGateway::start(&k.fake);
    let resp = generate(&gw, json!({"retries": 2}));
    let (status, code, message) = public_error(&resp);
    assert_eq!(
        (status, code.as_str()),
        (400, "content_policy_violation"),
        "{message}"
    );
    assert!(message.contains("risk control"), "{message}");
    // The task's verdict ends it: no resubmission, no further polls.
    assert_eq!(k.submits().len(), 1);
    assert_eq!(k.polls().len(), 5);
    assert_no_secrets(&resp.text());

    // The same through an asynchronous task.
    let public_id = start(&gw, json!({"model": MODEL, "prompt": "p", "async": true}));
    let done = finished(&gw, &public_id);
    assert_eq!(done["task_status"], "failed");
    assert_eq!(done["error"]["code"], "content_policy_violation");
    assert_eq!(done["data"], json!([]));
    k.assert_clean();
}

#[test]
fn a_task_failing_otherwise_is_an_upstream_error_not_retried() {
    let k = Kling::start();
    k.state().outcome = Outcome::Failed("internal error, please try again later".into());
    let gw = TestGateway::start(&k.fake);
    let resp = generate(&gw, json!({"retries": 2}));
    let (status, code, _) = public_error(&resp);
    assert_eq!(
        (status, code.as_str()),
        (502, "upstream_error"),
        "{}",
        resp.text()
    );
    assert_eq!(k.submits().len(), 1, "a failed task is not resubmitted");
    assert_eq!(k.polls().len(), 5, "nor polled again");
    assert!(
        resp.json()["message"]
            .as_str()
            .unwrap()
            .contains("internal error, please try again later"),
        "Kling's reason reaches the caller: {}",
        resp.text()
    );

    let public_id = start(&gw, json!({"model": MODEL, "prompt": "p", "async": true}));
    let done = finished(&gw, &public_id);
    assert_eq!(done["task_status"], "failed");
    assert_eq!(done["error"]["code"], "upstream_error");
    k.assert_clean();
}

// ---- native errors ---------------------------------------------------------------------------

#[test]
fn a_nonzero_code_inside_http_200_is_an_error() {
    let k = Kling::start();
    let gw = TestGateway::start(&k.fake);
    let cases = [
        (
            1301,
            "content security policy triggered",
            400,
            "content_policy_violation",
        ),
        (
            1201,
            "invalid value for aspect_ratio",
            400,
            "invalid_request",
        ),
        (
            1303,
            "parallel task over resource pack limit",
            429,
            "rate_limited",
        ),
        (1004, "token expired", 502, "upstream_auth_failed"),
        (1102, "resource pack exhausted", 502, "upstream_error"),
        (5000, "server error", 502, "upstream_error"),
    ];
    for (native, message, status, code) in cases {
        k.state().submit_replies.push_back(Reply::json(
            200,
            json!({"code": native, "message": message, "request_id": "r-200", "data": null}),
        ));
        let resp = generate(&gw, json!({}));
        let got = public_error(&resp);
        assert_eq!(
            (got.0, got.1.as_str()),
            (status, code),
            "code {native}: {}",
            resp.text()
        );
        if status == 400 {
            assert!(got.2.contains(message), "{}", got.2);
        }
        assert_no_secrets(&resp.text());
    }
    assert!(k.polls().is_empty(), "no task was accepted");
    assert_eq!(k.submits().len(), cases.len());

    // An account problem is not retried even when retries are allowed.
    k.state().submit_replies.push_back(Reply::json(
        200,
        json!({"code": 1101, "message": "account in arrears", "request_id": "r"}),
    ));
    let resp = generate(&gw, json!({"retries": 2}));
    assert_eq!(public_error(&resp).1, "upstream_error");
    assert_eq!(k.submits().len(), cases.len() + 1);
    k.assert_clean();
}

#[test]
fn http_error_envelopes_map_to_public_errors() {
    let k = Kling::start();
    let gw = TestGateway::start(&k.fake);
    let cases = [
        (401, 1004, "token expired", 502, "upstream_auth_failed"),
        (
            401,
            1000,
            "authentication failed",
            502,
            "upstream_auth_failed",
        ),
        (429, 1302, "rate limit exceeded", 429, "rate_limited"),
        (429, 1102, "resource pack depleted", 502, "upstream_error"),
        (
            403,
            1103,
            "unauthorized access to model",
            502,
            "upstream_error",
        ),
        (
            400,
            1201,
            "n must be between 1 and 9",
            400,
            "invalid_request",
        ),
        (
            400,
            1301,
            "prompt violates content policy",
            400,
            "content_policy_violation",
        ),
        (
            400,
            1300,
            "platform policy triggered",
            502,
            "upstream_error",
        ),
        (500, 5000, "internal server error", 502, "upstream_error"),
        (503, 5001, "service unavailable", 502, "upstream_error"),
        // Last: a model the provider does not serve is held out afterwards (retired).
        (404, 1203, "model not found", 503, "model_unavailable"),
    ];
    for (http, native, message, status, code) in cases {
        k.state()
            .submit_replies
            .push_back(kling_error(http, native, message));
        let resp = generate(&gw, json!({}));
        let got = public_error(&resp);
        assert_eq!(
            (got.0, got.1.as_str()),
            (status, code),
            "HTTP {http} code {native}: {}",
            resp.text()
        );
        if status == 400 {
            assert!(got.2.contains(message), "{}", got.2);
        }
        assert_no_secrets(&resp.text());
    }
    // retries 0: one submit each.
    assert_eq!(k.submits().len(), cases.len());
    k.assert_clean();
}

#[test]
fn rate_limited_and_failed_submits_are_retried() {
    let k = Kling::start();
    let gw = TestGateway::start(&k.fake);
    {
        let mut s = k.state();
        s.submit_replies.push_back(kling_error(
            429,
            1303,
            "parallel task over resource pack limit",
        ));
        s.submit_replies
            .push_back(kling_error(500, 5000, "internal server error"));
    }
    let resp = generate(&gw, json!({"retries": 2}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["data"].as_array().unwrap().len(), 1);
    let submits = k.submits();
    assert_eq!(submits.len(), 3);
    // Each attempt is the same request, signed.
    assert_eq!(submits[0].body, submits[2].body);
    k.assert_clean();

    // Without retries the 429 is the caller's.
    k.state()
        .submit_replies
        .push_back(kling_error(429, 1302, "rate limit exceeded"));
    let resp = generate(&gw, json!({}));
    assert_eq!(public_error(&resp).0, 429);
}

#[test]
fn polls_tolerate_a_passing_failure_but_not_an_unknown_task() {
    let k = Kling::start();
    let gw = TestGateway::start(&k.fake);
    k.state()
        .poll_replies
        .push_back(kling_error(500, 5000, "internal server error"));
    let resp = generate(&gw, json!({}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    // The failed poll, then the task's own five.
    assert_eq!(k.polls().len(), 6);

    k.state()
        .poll_replies
        .push_back(kling_error(404, 1203, "task not found"));
    let before = k.polls().len();
    let resp = generate(&gw, json!({}));
    assert_eq!(public_error(&resp).1, "upstream_error", "{}", resp.text());
    assert_eq!(
        k.polls().len(),
        before + 1,
        "an unknown task is not polled again"
    );
    k.assert_clean();
}

// ---- requests Kling cannot take, reference images --------------------------------------------

#[test]
fn negative_prompt_with_an_image_is_refused_before_sending() {
    let k = Kling::start();
    let gw = gateway_with_every_model(&k);
    let resp = generate(
        &gw,
        json!({"model": "kling-v1", "negative_prompt": "blurry", "image": "https://img.example/ref.png"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "validation_error");
    assert!(
        body["details"]["negative_prompt"].as_str().is_some(),
        "{body}"
    );
    // Nor a field Kling takes but the gateway never forwards from callers.
    let resp = generate(&gw, json!({"callback_url": "https://hook.example/k"}));
    assert_eq!(resp.status, 400);
    assert!(resp.json()["details"]["callback_url"].is_string());
    assert!(
        k.fake.requests().is_empty(),
        "a refused request reached Kling"
    );
}

/// The test config plus Kling's other image models, each with the family saying what it takes,
/// and a model Kling does not serve.
fn gateway_with_every_model(k: &Kling) -> TestGateway {
    let base = k.fake.base_url();
    TestGateway::start_with(|ports| {
        support::config(&base, ports)
            + "    kling-v1: {family: kling-v1, targets: [{provider: kling, model: kling-v1}]}\n"
            + "    kling-v1-5: {family: kling-v1-5, targets: [{provider: kling, model: kling-v1-5}]}\n"
            + "    kling-v2: {family: kling, targets: [{provider: kling, model: kling-v2}]}\n"
            + "    kling-v0: {family: kling, targets: [{provider: kling, model: kling-v0}]}\n"
    })
}

#[test]
fn reference_images_go_as_each_model_takes_them() {
    let k = Kling::start();
    let gw = gateway_with_every_model(&k);
    // kling-v1-5: a URL on another host, passed as is (Kling downloads it), typed by
    // `image_reference`, with strength as image_fidelity.
    let host = FakeProvider::start();
    let url = format!("{}/refs/face.png", host.base_url());
    let resp = generate(
        &gw,
        json!({"model": "kling-v1-5", "image": url, "strength": 0.8, "image_reference": "subject",
               "human_fidelity": 0.6}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        k.submits()[0].json(),
        json!({
            "model_name": "kling-v1-5",
            "prompt": "a lighthouse at dusk",
            "image": url,
            "image_fidelity": 0.8,
            "n": 1,
            "aspect_ratio": "1:1",
            "image_reference": "subject",
            "human_fidelity": 0.6
        })
    );
    assert!(
        host.requests().is_empty(),
        "the gateway fetched a URL Kling takes"
    );

    // kling-v1: a plain reference; bytes as raw base64 or a data URL go as raw base64 without
    // the prefix, default fidelity.
    let reference = png(90_000, 6);
    for given in [
        b64(&reference),
        format!("data:image/png;base64,{}", b64(&reference)),
    ] {
        let resp = generate(&gw, json!({"model": "kling-v1", "image": given}));
        assert_eq!(resp.status, 200, "{}", resp.text());
        let sent = k.submits().last().unwrap().json();
        assert_eq!(sent["model_name"], "kling-v1");
        let image = sent["image"].as_str().unwrap();
        assert!(!image.starts_with("data:"), "data: prefix sent");
        assert_eq!(unb64(image), reference);
        assert_eq!(sent["image_fidelity"], 0.5);
        assert!(sent.get("image_reference").is_none());
    }
    k.assert_clean();
}

/// What a model cannot take the way the gateway sends it is the caller's 400 naming the field,
/// never a request Kling refuses: the default kling-v2-1 (and kling-v2) take no plain reference
/// image on this endpoint, kling-v1-5 takes one only typed, kling-v1 and kling-v1-5 make 1K only.
#[test]
fn what_a_model_cannot_take_is_refused_before_sending() {
    let k = Kling::start();
    let gw = gateway_with_every_model(&k);
    for (body, field) in [
        (json!({"image": "https://img.example/a.png"}), "image"),
        (
            json!({"model": "kling-v2", "image": "https://img.example/a.png", "strength": 0.5}),
            "image",
        ),
        (json!({"image_reference": "face"}), "image_reference"),
        (
            json!({"model": "kling-v1-5", "image": "https://img.example/a.png"}),
            "image_reference",
        ),
        (
            json!({"model": "kling-v1-5", "image_reference": "face"}),
            "image_reference",
        ),
        (
            json!({"model": "kling-v1", "image": "https://img.example/a.png", "image_reference": "face"}),
            "image_reference",
        ),
        (json!({"model": "kling-v1", "quality": "pro"}), "quality"),
        (json!({"model": "kling-v1-5", "quality": "pro"}), "quality"),
        (
            json!({"model": "kling-v1", "aspect_ratio": "21:9"}),
            "aspect_ratio",
        ),
    ] {
        let resp = generate(&gw, body.clone());
        assert_eq!(resp.status, 400, "{body}: {}", resp.text());
        let answer = resp.json();
        assert_eq!(answer["code"], "validation_error", "{body}");
        assert!(answer["details"].get(field).is_some(), "{body}: {answer}");
    }
    assert!(
        k.fake.requests().is_empty(),
        "a refused request reached Kling"
    );
    // What they do take goes through.
    for body in [
        json!({"quality": "pro", "aspect_ratio": "21:9"}),
        json!({"model": "kling-v2", "quality": "pro"}),
        json!({"model": "kling-v1-5", "aspect_ratio": "21:9", "quality": "std"}),
    ] {
        let resp = generate(&gw, body.clone());
        assert_eq!(resp.status, 200, "{body}: {}", resp.text());
    }
    k.assert_clean();
}

/// `watermark: true` is Kling's `watermark_info: {"enabled": true}`; the watermarked copies
/// (`watermark_url`) are what the caller gets.
#[test]
fn a_watermark_delivers_klings_watermarked_copies() {
    let k = Kling::start();
    let gw = TestGateway::start(&k.fake);
    let resp = generate(&gw, json!({"n": 2, "watermark": true}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        k.submits()[0].json()["watermark_info"],
        json!({"enabled": true})
    );
    let id = only_task(&k);
    let base = k.fake.base_url();
    let urls: Vec<String> = resp.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["url"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        urls,
        (0..2)
            .map(|i| watermarked_url(&base, &id, i))
            .collect::<Vec<_>>()
    );
    // Without it, no watermark_info is sent and the plain images come back.
    let resp = generate(&gw, json!({}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(k.submits()[1].json().get("watermark_info").is_none());
    assert!(!resp.json()["data"][0]["url"]
        .as_str()
        .unwrap()
        .contains("-wm"));
    k.assert_clean();
}

/// A model Kling does not serve (code 1203, "the requested resource does not exist, e.g. the
/// model"): 503 `model_unavailable` naming the public and native model, not retried.
#[test]
fn a_model_kling_does_not_serve_is_named() {
    let k = Kling::start();
    let gw = gateway_with_every_model(&k);
    let resp = generate(&gw, json!({"model": "kling-v0", "retries": 2}));
    let (status, code, message) = public_error(&resp);
    assert_eq!(
        (status, code.as_str()),
        (503, "model_unavailable"),
        "{message}"
    );
    assert!(message.contains("model kling-v0 "), "{message}");
    assert!(
        message.contains("provider kling") && message.contains("model kling-v0 is not found"),
        "{message}"
    );
    assert_eq!(k.submits().len(), 1, "not retried");
    assert_no_secrets(&resp.text());
    k.assert_clean();
}
