//! A stateful emulator of DashScope's asynchronous Wan text-to-image API on a [`FakeProvider`]:
//! `POST /api/v1/services/aigc/text2image/image-synthesis` (with `X-DashScope-Async: enable`, else
//! DashScope's "does not support synchronous calls" error) creates a task; `GET
//! /api/v1/tasks/{id}` walks it through `PENDING` → `RUNNING` → its scripted end; result URLs point
//! back at the fake (`/results/{task}/{i}.png`), which serves the image bytes. Each result names
//! the submitted prompt (`orig_prompt`); a task submitted with `parameters.prompt_extend: true`
//! also carries the rewritten prompt (`actual_prompt`, see [`extended`]), as DashScope's do.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::fake::{FakeProvider, Recorded, Reply};
use super::image_conformance::png;

pub const SUBMIT_PATH: &str = "/api/v1/services/aigc/text2image/image-synthesis";
pub const TASKS_PATH: &str = "/api/v1/tasks/";

/// How a task ends.
#[derive(Clone, Debug)]
pub enum End {
    /// `SUCCEEDED` with as many images as the submit's `parameters.n`.
    Succeed,
    /// `FAILED` with this code and message.
    Failed(&'static str, &'static str),
    /// `SUCCEEDED`, but the last image carries this code instead of a URL.
    PartlyFailed(&'static str),
    Canceled,
    Unknown,
    /// Stays `RUNNING` until [`Wan::finish`] is called, then succeeds.
    Held,
}

struct Task {
    n: u64,
    prompt: String,
    /// `parameters.prompt_extend` was `true`.
    extend: bool,
    polls: u32,
    end: End,
}

#[derive(Default)]
struct State {
    tasks: HashMap<String, Task>,
    /// How the next submitted tasks end (in order; the last one repeats).
    ends: Vec<End>,
    released: bool,
    submitted: u32,
}

/// The emulator's handle: script tasks, release held ones, read what happened.
#[derive(Clone)]
pub struct Wan {
    state: Arc<Mutex<State>>,
    base: String,
    /// Polls a task answers `PENDING`, then `RUNNING`, before its end.
    pending_polls: u32,
    running_polls: u32,
}

/// The `actual_prompt` the emulator reports for `prompt` when `prompt_extend` is on.
pub fn extended(prompt: &str) -> String {
    format!("{prompt}, richly detailed, soft light")
}

/// The image bytes of result `i` of task `id`.
pub fn result_png(id: &str, i: usize) -> Vec<u8> {
    png(600 + i, id.len() as u8 + i as u8)
}

impl Wan {
    /// Install the emulator on `fake`; tasks end as `end` after one `PENDING` and one `RUNNING`
    /// poll.
    pub fn install(fake: &FakeProvider, end: End) -> Wan {
        Wan::install_paced(fake, end, 1, 1)
    }

    /// Install the emulator on `fake`; tasks answer `pending_polls` polls `PENDING`, then
    /// `running_polls` `RUNNING`, then end as `end`.
    pub fn install_paced(
        fake: &FakeProvider,
        end: End,
        pending_polls: u32,
        running_polls: u32,
    ) -> Wan {
        let wan = Wan {
            state: Arc::new(Mutex::new(State {
                ends: vec![end],
                ..State::default()
            })),
            base: fake.base_url(),
            pending_polls,
            running_polls,
        };
        let handler = wan.clone();
        fake.set_handler(move |req| handler.answer(req));
        wan
    }

    /// Let every `Held` task finish (successfully) at its next poll.
    pub fn finish(&self) {
        self.state.lock().unwrap().released = true;
    }

    /// Tasks submitted so far.
    pub fn submitted(&self) -> u32 {
        self.state.lock().unwrap().submitted
    }

    /// Polls task `id` received so far.
    pub fn polls(&self, id: &str) -> u32 {
        self.state
            .lock()
            .unwrap()
            .tasks
            .get(id)
            .map(|t| t.polls)
            .unwrap_or(0)
    }

    /// The ids of the tasks submitted so far.
    pub fn task_ids(&self) -> Vec<String> {
        self.state.lock().unwrap().tasks.keys().cloned().collect()
    }

    /// The emulator's answer to `req` (`None`: not a DashScope path), for handlers that wrap it.
    pub fn answer(&self, req: &Recorded) -> Option<Reply> {
        if req.method == "POST" && req.path == SUBMIT_PATH {
            return Some(self.submit(req));
        }
        if req.method == "GET" {
            if let Some(id) = req.path.strip_prefix(TASKS_PATH) {
                return Some(self.poll(id));
            }
            if let Some(rest) = req.path.strip_prefix("/results/") {
                let (id, file) = rest.split_once('/')?;
                let i: usize = file.strip_suffix(".png")?.parse().ok()?;
                return Some(Reply::bytes(200, "image/png", result_png(id, i)));
            }
        }
        None
    }

    fn submit(&self, req: &Recorded) -> Reply {
        if req.header("x-dashscope-async") != Some("enable") {
            return Reply::json(
                403,
                json!({"request_id": "r", "code": "AccessDenied",
                       "message": "current user api does not support synchronous calls"}),
            );
        }
        let body: Value = req.json();
        let n = body["parameters"]["n"].as_u64().unwrap_or(4);
        let prompt = body["input"]["prompt"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let extend = body["parameters"]["prompt_extend"] == json!(true);
        let mut state = self.state.lock().unwrap();
        state.submitted += 1;
        let end = if state.ends.len() > 1 {
            state.ends.remove(0)
        } else {
            state.ends[0].clone()
        };
        let id = uuid::Uuid::new_v4().to_string();
        state.tasks.insert(
            id.clone(),
            Task {
                n,
                prompt,
                extend,
                polls: 0,
                end,
            },
        );
        Reply::json(
            200,
            json!({"request_id": "req-1", "output": {"task_id": id, "task_status": "PENDING"}}),
        )
    }

    fn poll(&self, id: &str) -> Reply {
        let mut state = self.state.lock().unwrap();
        let released = state.released;
        let Some(task) = state.tasks.get_mut(id) else {
            return Reply::json(
                200,
                json!({"request_id": "r", "output": {"task_id": id, "task_status": "UNKNOWN"}}),
            );
        };
        task.polls += 1;
        let status =
            |s: &str| json!({"request_id": "r", "output": {"task_id": id, "task_status": s}});
        if task.polls <= self.pending_polls {
            return Reply::json(200, status("PENDING"));
        }
        if task.polls <= self.pending_polls + self.running_polls {
            return Reply::json(200, status("RUNNING"));
        }
        let urls = |count: u64| -> Vec<Value> {
            (0..count as usize)
                .map(|i| {
                    let mut item = json!({"url": format!("{}/results/{id}/{i}.png", self.base),
                                          "orig_prompt": task.prompt});
                    if task.extend {
                        item["actual_prompt"] = json!(extended(&task.prompt));
                    }
                    item
                })
                .collect()
        };
        let body = match &task.end {
            End::Held if !released => status("RUNNING"),
            End::Succeed | End::Held => json!({"request_id": "r", "output": {
                "task_id": id, "task_status": "SUCCEEDED", "results": urls(task.n),
                "task_metrics": {"TOTAL": task.n, "SUCCEEDED": task.n, "FAILED": 0}},
                "usage": {"image_count": task.n}}),
            End::Failed(code, message) => json!({"request_id": "r", "output": {
                "task_id": id, "task_status": "FAILED", "code": code, "message": message}}),
            End::PartlyFailed(code) => {
                let mut results = urls(task.n.saturating_sub(1));
                results.push(json!({"code": code, "message": "refused"}));
                json!({"request_id": "r", "output": {"task_id": id, "task_status": "SUCCEEDED", "results": results}})
            }
            End::Canceled => status("CANCELED"),
            End::Unknown => status("UNKNOWN"),
        };
        Reply::json(200, body)
    }
}
