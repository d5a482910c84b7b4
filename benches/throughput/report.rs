//! The figures a run collected, and the tables printed from them (Markdown, so they paste into
//! `benches/README.md` as they are).

use std::fmt::Write;

use crate::load::Outcome;
use crate::stream::{self, BigOutcome};
use crate::workload::Workload;

/// Which process a load ran against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The fake provider itself (no proxy).
    Direct,
    /// The plain Pingora proxy.
    Baseline,
    /// Switchyard.
    Gateway,
}

impl Via {
    pub const ALL: [Via; 3] = [Via::Direct, Via::Baseline, Via::Gateway];

    pub fn name(self) -> &'static str {
        match self {
            Via::Direct => "direct",
            Via::Baseline => "baseline",
            Via::Gateway => "gateway",
        }
    }
}

/// One load run.
#[derive(Debug, Clone)]
pub struct LoadRow {
    pub workload: Workload,
    pub conns: usize,
    pub rate: Option<f64>,
    pub via: Via,
    pub out: Outcome,
    /// CPU of the process under test in the window (0 for direct).
    pub server_cpu_ns: u64,
    /// CPU of the fake and of the load client in the window (both on the client core).
    pub fake_cpu_ns: u64,
    pub client_cpu_ns: u64,
    /// Sampled peak RSS of the process under test, KiB (0 for direct).
    pub rss_peak_kib: u64,
    /// HTTPS workloads through a proxy: the fake's TLS connections and handshakes in the run,
    /// warm-up included.
    pub tls: Option<crate::tls::Snapshot>,
}

impl LoadRow {
    /// Requests per CPU-second of the process under test.
    pub fn per_cpu_s(&self) -> f64 {
        if self.server_cpu_ns == 0 {
            return f64::NAN;
        }
        self.out.ok as f64 / (self.server_cpu_ns as f64 / 1e9)
    }

    fn busy(&self, ns: u64) -> f64 {
        ns as f64 / (self.out.secs * 1e9) * 100.0
    }
}

/// A timed-stream measurement.
#[derive(Debug, Clone)]
pub struct SseRow {
    pub stream: &'static str,
    pub via: Via,
    pub delays_ns: Vec<i64>,
    pub missing: usize,
}

/// Everything one run measured.
#[derive(Default)]
pub struct Results {
    pub rows: Vec<LoadRow>,
    pub big: Vec<(Via, BigOutcome)>,
    pub sse: Vec<SseRow>,
    pub gateway_hwm_kib: u64,
    pub baseline_hwm_kib: u64,
    /// The gateway's trace spans exported, failed, dropped (with a metrics listener).
    pub trace_spans: [u64; 3],
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| !x.is_nan());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Closed-loop scenarios, `(workload, conns)` in run order.
fn closed_groups(r: &Results) -> Vec<(Workload, usize)> {
    let mut g: Vec<(Workload, usize)> = Vec::new();
    for row in r.rows.iter().filter(|x| x.rate.is_none()) {
        if !g.contains(&(row.workload, row.conns)) {
            g.push((row.workload, row.conns));
        }
    }
    g
}

impl Results {
    fn runs(&self, w: Workload, conns: usize, rate: Option<f64>, via: Via) -> Vec<&LoadRow> {
        self.rows
            .iter()
            .filter(|x| x.workload == w && x.conns == conns && x.rate == rate && x.via == via)
            .collect()
    }

    /// Median over rounds of `f` for one scenario and target.
    pub fn med(
        &self,
        w: Workload,
        conns: usize,
        rate: Option<f64>,
        via: Via,
        f: impl Fn(&LoadRow) -> f64,
    ) -> f64 {
        median(self.runs(w, conns, rate, via).into_iter().map(f).collect())
    }

    /// Gateway ÷ baseline requests per CPU-second: median and range over rounds.
    pub fn cpu_ratio(&self, w: Workload, conns: usize) -> (f64, f64, f64) {
        let g = self.runs(w, conns, None, Via::Gateway);
        let b = self.runs(w, conns, None, Via::Baseline);
        let ratios: Vec<f64> = g
            .iter()
            .zip(b.iter())
            .map(|(g, b)| g.per_cpu_s() / b.per_cpu_s())
            .collect();
        let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (median(ratios), lo, hi)
    }

    /// Latency the gateway adds over direct at quantile `q`, ms (medians over rounds).
    pub fn added(&self, w: Workload, conns: usize, rate: Option<f64>, q: f64) -> f64 {
        self.med(w, conns, rate, Via::Gateway, |x| x.out.ms(q))
            - self.med(w, conns, rate, Via::Direct, |x| x.out.ms(q))
    }

    pub fn sse_row(&self, stream: &str, via: Via) -> Option<&SseRow> {
        self.sse.iter().find(|s| s.stream == stream && s.via == via)
    }

    /// Every table, as Markdown.
    pub fn render(&self, rounds: usize) -> String {
        let mut s = String::new();
        self.render_capacity(&mut s, rounds);
        self.render_ratios(&mut s);
        self.render_paced(&mut s);
        self.render_streams(&mut s);
        self.render_tls(&mut s);
        s
    }

    /// The HTTPS workloads' connections to the fake's TLS listener, run by run: pooled
    /// connections show as a handshake count near the connection count, far below the requests.
    fn render_tls(&self, s: &mut String) {
        let rows: Vec<&LoadRow> = self.rows.iter().filter(|r| r.tls.is_some()).collect();
        if rows.is_empty() {
            return;
        }
        let _ = writeln!(
            s,
            "\n### HTTPS to the provider: TLS connections and handshakes per run (warm-up included)\n"
        );
        let _ = writeln!(
            s,
            "| scenario | conns | via | requests (window) | TLS connections | full handshakes | resumed |"
        );
        let _ = writeln!(s, "|---|---:|---|---:|---:|---:|---:|");
        for r in rows {
            let Some(t) = r.tls else { continue };
            let _ = writeln!(
                s,
                "| {} | {}{} | {} | {} | {} | {} | {} |",
                r.workload.name(),
                r.conns,
                r.rate.map(|x| format!(" at {x:.0}/s")).unwrap_or_default(),
                r.via.name(),
                r.out.ok,
                t.accepted,
                t.full,
                t.resumed
            );
        }
    }

    fn render_capacity(&self, s: &mut String, rounds: usize) {
        let _ = writeln!(
            s,
            "\n### Closed loop (capacity){}\n",
            if rounds > 1 {
                format!(": medians of {rounds} rounds")
            } else {
                String::new()
            }
        );
        let _ = writeln!(s, "| scenario | conns | via | req/s | p50 ms | p99 ms | max ms | errors | req per CPU-s | CPU µs/req | server CPU % | peak RSS MiB | client core % |");
        let _ = writeln!(
            s,
            "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for (w, c) in closed_groups(self) {
            for via in Via::ALL {
                if self.runs(w, c, None, via).is_empty() {
                    continue;
                }
                let m = |f: &dyn Fn(&LoadRow) -> f64| self.med(w, c, None, via, f);
                let per_cpu = m(&|x| x.per_cpu_s());
                let dash = |v: f64, p: usize| {
                    if v.is_nan() {
                        "–".to_string()
                    } else {
                        format!("{v:.p$}")
                    }
                };
                let _ = writeln!(
                    s,
                    "| {} | {c} | {} | {:.0} | {:.3} | {:.3} | {:.2} | {:.0} | {} | {} | {} | {} | {:.0} |",
                    w.name(),
                    via.name(),
                    m(&|x| x.out.rps()),
                    m(&|x| x.out.ms(0.5)),
                    m(&|x| x.out.ms(0.99)),
                    m(&|x| x.out.ms(1.0)),
                    m(&|x| x.out.errors as f64),
                    dash(per_cpu, 0),
                    dash(1e6 / per_cpu, 1),
                    dash(m(&|x| if x.server_cpu_ns == 0 { f64::NAN } else { x.busy(x.server_cpu_ns) }), 0),
                    dash(m(&|x| if x.rss_peak_kib == 0 { f64::NAN } else { mib(x.rss_peak_kib) }), 1),
                    m(&|x| x.busy(x.fake_cpu_ns + x.client_cpu_ns)),
                );
            }
        }
    }

    fn render_ratios(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "\n### Gateway against the plain Pingora proxy (same run)\n"
        );
        let _ = writeln!(s, "| scenario | conns | req/s ratio | req per CPU-s ratio (range) | gateway CPU µs/req | baseline CPU µs/req | gateway adds p50 ms | gateway adds p99 ms | baseline adds p50 ms | baseline adds p99 ms |");
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (w, c) in closed_groups(self) {
            let rps = |v| self.med(w, c, None, v, |x| x.out.rps());
            let cpu_us = |v| self.med(w, c, None, v, |x| 1e6 / x.per_cpu_s());
            let (ratio, lo, hi) = self.cpu_ratio(w, c);
            let base_added = |q: f64| {
                self.med(w, c, None, Via::Baseline, |x| x.out.ms(q))
                    - self.med(w, c, None, Via::Direct, |x| x.out.ms(q))
            };
            let range = if lo < hi {
                format!(" ({lo:.2}–{hi:.2})")
            } else {
                String::new()
            };
            let _ = writeln!(
                s,
                "| {} | {c} | {:.2} | {ratio:.2}{range} | {:.1} | {:.1} | {:+.3} | {:+.3} | {:+.3} | {:+.3} |",
                w.name(),
                rps(Via::Gateway) / rps(Via::Baseline),
                cpu_us(Via::Gateway),
                cpu_us(Via::Baseline),
                self.added(w, c, None, 0.5),
                self.added(w, c, None, 0.99),
                base_added(0.5),
                base_added(0.99),
            );
        }
    }

    fn render_paced(&self, s: &mut String) {
        let mut groups: Vec<(Workload, usize, f64)> = Vec::new();
        for row in &self.rows {
            if let Some(rate) = row.rate {
                if !groups.contains(&(row.workload, row.conns, rate)) {
                    groups.push((row.workload, row.conns, rate));
                }
            }
        }
        if groups.is_empty() {
            return;
        }
        let _ = writeln!(s, "\n### Paced (latency at a fixed request rate)\n");
        let _ = writeln!(s, "| scenario | conns | req/s asked | via | req/s | p50 ms | p99 ms | max ms | late sends | errors | server CPU % | adds p50 ms | adds p99 ms |");
        let _ = writeln!(
            s,
            "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for (w, c, rate) in groups {
            for via in Via::ALL {
                let m = |f: &dyn Fn(&LoadRow) -> f64| self.med(w, c, Some(rate), via, f);
                let added = |q: f64| {
                    if via == Via::Direct {
                        "–".to_string()
                    } else {
                        format!(
                            "{:+.3}",
                            m(&|x| x.out.ms(q))
                                - self.med(w, c, Some(rate), Via::Direct, |x| x.out.ms(q))
                        )
                    }
                };
                let cpu = m(&|x| {
                    if x.server_cpu_ns == 0 {
                        f64::NAN
                    } else {
                        x.busy(x.server_cpu_ns)
                    }
                });
                let _ = writeln!(
                    s,
                    "| {} | {c} | {rate:.0} | {} | {:.0} | {:.3} | {:.3} | {:.2} | {:.0} | {:.0} | {} | {} | {} |",
                    w.name(),
                    via.name(),
                    m(&|x| x.out.rps()),
                    m(&|x| x.out.ms(0.5)),
                    m(&|x| x.out.ms(0.99)),
                    m(&|x| x.out.ms(1.0)),
                    m(&|x| x.out.late as f64),
                    m(&|x| x.out.errors as f64),
                    if cpu.is_nan() { "–".to_string() } else { format!("{cpu:.0}") },
                    added(0.5),
                    added(0.99),
                );
            }
        }
    }

    fn render_streams(&self, s: &mut String) {
        if !self.big.is_empty() {
            let _ = writeln!(s, "\n### 100 MiB audio answer\n");
            let _ = writeln!(
                s,
                "| via | status | MiB | MiB/s | RSS before MiB | RSS peak MiB | RSS growth MiB |"
            );
            let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
            for (via, b) in &self.big {
                let (before, peak, growth) = if *via == Via::Direct {
                    ("–".into(), "–".into(), "–".into())
                } else {
                    (
                        format!("{:.1}", mib(b.rss_before)),
                        format!("{:.1}", mib(b.rss_peak)),
                        format!("{:.1}", mib(b.rss_peak.saturating_sub(b.rss_before))),
                    )
                };
                let _ = writeln!(
                    s,
                    "| {} | {} | {:.0} | {:.0} | {before} | {peak} | {growth} |",
                    via.name(),
                    b.status,
                    b.bytes as f64 / 1048576.0,
                    b.bytes as f64 / 1048576.0 / b.secs.max(1e-9),
                );
            }
        }
        if !self.sse.is_empty() {
            let _ = writeln!(
                s,
                "\n### Timed event streams (delay from the fake's write to the client's read)\n"
            );
            let _ = writeln!(s, "| stream | via | events | missing | p50 ms | p99 ms | max ms | adds p50 ms | adds p99 ms | adds max ms |");
            let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
            for row in &self.sse {
                let d = &row.delays_ns;
                let direct = self.sse_row(row.stream, Via::Direct);
                let added = |q: f64| match (row.via, direct) {
                    (Via::Direct, _) | (_, None) => "–".to_string(),
                    (_, Some(dr)) => {
                        format!("{:+.3}", stream::ms(d, q) - stream::ms(&dr.delays_ns, q))
                    }
                };
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {} | {} | {} |",
                    row.stream,
                    row.via.name(),
                    d.len(),
                    row.missing,
                    stream::ms(d, 0.5),
                    stream::ms(d, 0.99),
                    stream::ms(d, 1.0),
                    added(0.5),
                    added(0.99),
                    added(1.0),
                );
            }
        }
        let _ = writeln!(
            s,
            "\nPeak RSS over the whole run (VmHWM): gateway {:.1} MiB, baseline {:.1} MiB.",
            mib(self.gateway_hwm_kib),
            mib(self.baseline_hwm_kib)
        );
    }
}
