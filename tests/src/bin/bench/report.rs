//! The printed results: one markdown table of round trips, and what each server actually answered, so a fast
//! number from a server that only returned an error cannot pass for real work.

use std::time::Duration;

use modelplane_function::proto::v1::{RunFunctionResponse, Severity};
use modelplane_tests::fleet::{Scenario, clouds, scale};
use prost::Message;

use crate::load::Sample;

/// Index of our server in every per-server list; the other entries are what it is compared against.
pub const OURS: usize = 0;

/// The measurements of one request at one concurrency, one sample per server.
pub struct Row {
    pub scenario: Scenario,
    pub request: String,
    pub request_bytes: usize,
    pub concurrency: usize,
    pub samples: Vec<Sample>,
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

fn rate(per_second: f64) -> String {
    if per_second >= 1000.0 {
        format!("{:.1}k", per_second / 1000.0)
    } else {
        format!("{per_second:.0}")
    }
}

fn size(bytes: usize) -> String {
    if bytes >= 1024 {
        format!("{:.0} KB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

pub fn print_table(servers: &[&str], rows: &[Row]) {
    let mut header = String::from("| request | callers |");
    let mut rule = String::from("|---|---:|");
    for name in servers {
        header.push_str(&format!(" {name} p50 / p99 ms, req/s |"));
        rule.push_str("---|");
    }
    for name in &servers[OURS + 1..] {
        header.push_str(&format!(" ours vs {name}: p50, req/s |"));
        rule.push_str("---|");
    }
    println!("{header}\n{rule}");
    for row in rows {
        let mut line = format!(
            "| {} ({}) | {} |",
            row.request,
            size(row.request_bytes),
            row.concurrency
        );
        for sample in &row.samples {
            let errors = if sample.errors > 0 {
                format!(", **{} errors**", sample.errors)
            } else {
                String::new()
            };
            line.push_str(&format!(
                " {} / {}, {}{errors} |",
                ms(sample.percentile(50.0)),
                ms(sample.percentile(99.0)),
                rate(sample.throughput())
            ));
        }
        let ours = &row.samples[OURS];
        for theirs in &row.samples[OURS + 1..] {
            let p50 = ours.percentile(50.0).as_secs_f64() / theirs.percentile(50.0).as_secs_f64().max(1e-9);
            let throughput = ours.throughput() / theirs.throughput().max(1e-9);
            line.push_str(&format!(" {p50:.2}x, {throughput:.2}x |"));
        }
        println!("{line}");
    }
    println!(
        "\nRatios are ours ÷ theirs: a p50 ratio under 1 means we answer faster, a req/s ratio over 1 means we \
         serve more."
    );
}

/// The fleet-scale reconciles at one caller, as issue 16 asks for them: per server its p50 / p99 and its p50
/// against the same reconcile with no other deployments, then ours against each no-op.
pub fn print_fleet_scale(servers: &[&str], rows: &[Row]) {
    let single: Vec<(usize, bool, &Row)> = rows
        .iter()
        .filter(|row| row.concurrency == 1)
        .filter_map(|row| match row.scenario {
            Scenario::FleetScale { others, waiting } => Some((others, waiting, row)),
            _ => None,
        })
        .collect();
    if single.is_empty() {
        return;
    }
    let mut header = String::from("\n| reconcile | other deployments | request |");
    let mut rule = String::from("|---|---:|---:|");
    for name in servers {
        header.push_str(&format!(" {name} p50 / p99 ms (p50 vs 0 others) |"));
        rule.push_str("---|");
    }
    for name in &servers[OURS + 1..] {
        header.push_str(&format!(" ours vs {name}: p50 |"));
        rule.push_str("---:|");
    }
    header.push_str(" composites one replica change concerns, before / after |");
    rule.push_str("---|");
    println!("{header}\n{rule}");
    for &(others, waiting, row) in &single {
        let zero = single
            .iter()
            .find(|(o, w, _)| *o == 0 && *w == waiting)
            .map(|(_, _, zero)| *zero);
        let mut line = format!(
            "| {} | {others} | {} |",
            if waiting { "waiting" } else { "settled" },
            size(row.request_bytes)
        );
        for (server, sample) in row.samples.iter().enumerate() {
            let p50 = sample.percentile(50.0);
            let against_zero = zero.map_or(String::from("?"), |zero| {
                let base = zero.samples[server].percentile(50.0).as_secs_f64().max(1e-9);
                format!("{:.2}x", p50.as_secs_f64() / base)
            });
            line.push_str(&format!(
                " {} / {} ({against_zero}) |",
                ms(p50),
                ms(sample.percentile(99.0))
            ));
        }
        let ours = row.samples[OURS].percentile(50.0).as_secs_f64();
        for theirs in &row.samples[OURS + 1..] {
            let ratio = ours / theirs.percentile(50.0).as_secs_f64().max(1e-9);
            line.push_str(&format!(" {ratio:.2}x |"));
        }
        let (before, after) = scale::concerned(others);
        line.push_str(&format!(" {before} / {after} |"));
        println!("{line}");
    }
}

/// The settled cluster reconciles, one row per cloud, and what a 100-cluster mixed-cloud fleet costs per poll:
/// [`clouds::CLUSTERS_PER_CLOUD`] reconciles of each, one caller.
pub fn print_clouds(servers: &[&str], rows: &[Row]) {
    let single: Vec<&Row> = rows
        .iter()
        .filter(|row| row.concurrency == 1 && matches!(row.scenario, Scenario::SettledCluster { .. }))
        .collect();
    if single.is_empty() {
        return;
    }
    let mut header = String::from("\n| settled reconcile | request |");
    let mut rule = String::from("|---|---:|");
    for name in servers {
        header.push_str(&format!(" {name} p50 / p99 ms |"));
        rule.push_str("---|");
    }
    for name in &servers[OURS + 1..] {
        header.push_str(&format!(" ours vs {name}: p50 |"));
        rule.push_str("---:|");
    }
    println!("{header}\n{rule}");
    let mut fleet = vec![0.0; servers.len()];
    for row in &single {
        let mut line = format!("| {} | {} |", row.request, size(row.request_bytes));
        for (server, sample) in row.samples.iter().enumerate() {
            let p50 = sample.percentile(50.0);
            fleet[server] += p50.as_secs_f64() * clouds::CLUSTERS_PER_CLOUD as f64;
            line.push_str(&format!(" {} / {} |", ms(p50), ms(sample.percentile(99.0))));
        }
        let ours = row.samples[OURS].percentile(50.0).as_secs_f64();
        for theirs in &row.samples[OURS + 1..] {
            let ratio = ours / theirs.percentile(50.0).as_secs_f64().max(1e-9);
            line.push_str(&format!(" {ratio:.2}x |"));
        }
        println!("{line}");
    }
    let clusters = single.len() * clouds::CLUSTERS_PER_CLOUD;
    let mut line = format!("| {clusters}-cluster mixed fleet, one poll (sum of p50s) | |");
    for total in &fleet {
        line.push_str(&format!(" {:.1} |", total * 1e3));
    }
    for theirs in &fleet[OURS + 1..] {
        line.push_str(&format!(" {:.2}x |", fleet[OURS] / theirs.max(1e-9)));
    }
    println!("{line}");
}

/// A one-line account of a response: how big, whether the tag came back, and what the function decided.
pub fn describe_answer(request_tag: &str, encoded: &[u8]) -> String {
    let response = match RunFunctionResponse::decode(encoded) {
        Ok(response) => response,
        Err(e) => return format!("undecodable response ({} bytes): {e}", encoded.len()),
    };
    let tag_echoed = response.meta.as_ref().is_some_and(|meta| meta.tag == request_tag);
    let desired = response.desired.unwrap_or_default();
    let status_set = desired
        .composite
        .and_then(|composite| composite.resource)
        .is_some_and(|raw| !raw.is_empty());
    let mut summary = format!(
        "{}, tag {}, {} desired resources, composite status {}, {} conditions, {} requirements",
        size(encoded.len()),
        if tag_echoed { "echoed" } else { "NOT echoed" },
        desired.resources.len(),
        if status_set { "set" } else { "untouched" },
        response.conditions.len(),
        response.requirements.map_or(0, |r| r.resources.len()
            + r.extra_resources.len()
            + r.schemas.len()),
    );
    for result in &response.results {
        let severity = Severity::try_from(result.severity).map_or("UNKNOWN", |s| s.as_str_name());
        let message: String = result.message.chars().take(110).collect();
        summary.push_str(&format!("; {severity}: {message}"));
    }
    summary
}
