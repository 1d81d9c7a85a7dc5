//! purra-core benchmarks: JSON identity throughput, and schema validation against the `jsonschema` crate.
//!
//! Run with `cargo bench -p purra-bench --bench core`. After criterion's own report, the harness reads
//! criterion's median estimates back and prints one ratio per workload (jsonschema time / purra time:
//! above 1 means purra is faster).

use criterion::{BenchmarkId, Criterion, Throughput};
use purra_core::{json_identity, CompiledSchema};
use serde_json::{json, Value};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A tool call's arguments (small, typical).
fn small_arguments() -> Value {
    json!({"query": "quarterly report", "limit": 20, "offset": 0, "filters": {"owner": "alice", "tags": ["finance", "q3"]}, "exact": false})
}

/// A catalog-like document: 50 tool descriptors with schemas (about 20 KB).
fn catalog_document() -> Value {
    let tools: Vec<Value> = (0..50)
        .map(|i| {
            json!({
                "name": format!("tool_{i}"),
                "description": format!("Searches collection number {i} for documents matching a query; returns ids and titles."),
                "inputSchema": tool_input_schema(),
                "policy": {"mode": "read", "title": format!("Tool {i}")},
                "concurrencySafe": i % 2 == 0,
            })
        })
        .collect();
    json!({"profile": "purra.catalog/v1", "tools": tools})
}

/// 10 000 doubles: stresses ECMAScript number formatting.
fn numbers_document() -> Value {
    Value::Array(
        (0..10_000)
            .map(|i| json!(i as f64 * 1.000_001 + 0.1))
            .collect(),
    )
}

fn tool_input_schema() -> Value {
    json!({
        "type": "object",
        "required": ["query"],
        "additionalProperties": false,
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[\\w .,-]+$"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100},
            "offset": {"type": "integer", "minimum": 0},
            "filters": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "owner": {"type": "string", "maxLength": 64},
                    "tags": {"type": "array", "maxItems": 10, "items": {"type": "string", "enum": ["finance", "q1", "q2", "q3", "q4", "legal"]}}
                }
            },
            "exact": {"type": "boolean"}
        }
    })
}

fn result_schema() -> Value {
    json!({
        "type": "object",
        "required": ["items"],
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "title", "score"],
                    "properties": {
                        "id": {"type": "string", "pattern": "^doc-[0-9]+$"},
                        "title": {"type": "string", "maxLength": 200},
                        "score": {"type": "number", "minimum": 0, "maximum": 1},
                        "kind": {"anyOf": [{"const": "pdf"}, {"const": "html"}, {"type": "null"}]}
                    }
                }
            },
            "next": {"type": ["string", "null"]}
        }
    })
}

fn result_instance() -> Value {
    let items: Vec<Value> = (0..100)
        .map(|i| json!({"id": format!("doc-{i}"), "title": format!("Document number {i}"), "score": (i as f64) / 100.0, "kind": if i % 2 == 0 { json!("pdf") } else { Value::Null }}))
        .collect();
    json!({"items": items, "next": null})
}

fn validation_workloads() -> Vec<(&'static str, Value, Value, bool)> {
    let mut invalid_args = small_arguments();
    invalid_args["filters"]["tags"] = json!(["finance", "q5"]);
    let mut invalid_result = result_instance();
    invalid_result["items"][99]["score"] = json!(1.5);
    vec![
        (
            "tool_args_valid",
            tool_input_schema(),
            small_arguments(),
            true,
        ),
        (
            "tool_args_invalid",
            tool_input_schema(),
            invalid_args,
            false,
        ),
        (
            "result_100_items_valid",
            result_schema(),
            result_instance(),
            true,
        ),
        (
            "result_100_items_invalid",
            result_schema(),
            invalid_result,
            false,
        ),
    ]
}

fn bench_identity(c: &mut Criterion) {
    let mut group = c.benchmark_group("identity");
    for (name, doc) in [
        ("small_arguments", small_arguments()),
        ("catalog_50_tools", catalog_document()),
        ("numbers_10k", numbers_document()),
    ] {
        let bytes = serde_json::to_vec(&doc).expect("serializable").len() as u64;
        group.throughput(Throughput::Bytes(bytes));
        group.bench_with_input(
            BenchmarkId::new("purra_json_identity", name),
            &doc,
            |b, doc| b.iter(|| json_identity(black_box(doc)).expect("I-JSON")),
        );
        group.bench_with_input(
            BenchmarkId::new("serde_json_to_vec", name),
            &doc,
            |b, doc| b.iter(|| serde_json::to_vec(black_box(doc)).expect("serializable")),
        );
    }
    group.finish();
}

fn bench_validation(c: &mut Criterion) {
    let mut group = c.benchmark_group("validate");
    for (name, schema, instance, valid) in validation_workloads() {
        let ours = CompiledSchema::compile(&schema).expect("inside the profile");
        let theirs = jsonschema::draft202012::new(&schema).expect("valid schema");
        assert_eq!(ours.is_valid(&instance), valid, "{name}");
        assert_eq!(theirs.is_valid(&instance), valid, "{name}");
        group.bench_with_input(BenchmarkId::new("purra", name), &instance, |b, inst| {
            b.iter(|| ours.is_valid(black_box(inst)))
        });
        group.bench_with_input(
            BenchmarkId::new("jsonschema", name),
            &instance,
            |b, inst| b.iter(|| theirs.is_valid(black_box(inst))),
        );
    }
    group.finish();
}

fn median_ns(dir: &Path, group: &str, function: &str, input: &str) -> Option<f64> {
    let path = dir
        .join(group)
        .join(function)
        .join(input)
        .join("new")
        .join("estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let estimates: Value = serde_json::from_str(&text).ok()?;
    estimates["median"]["point_estimate"].as_f64()
}

fn main() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("criterion");
    let mut c = Criterion::default()
        .output_directory(&dir)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    bench_identity(&mut c);
    bench_validation(&mut c);
    c.final_summary();
    // Benchmarks are the one place that reports on stdout.
    #[allow(clippy::print_stdout)]
    {
        println!(
            "\nratios (median time of the other / median time of purra; > 1 means purra is faster)"
        );
        for (name, ..) in validation_workloads() {
            if let (Some(ours), Some(theirs)) = (
                median_ns(&dir, "validate", "purra", name),
                median_ns(&dir, "validate", "jsonschema", name),
            ) {
                println!("validate {name:<26} purra {ours:>10.0} ns  jsonschema {theirs:>10.0} ns  ratio {:.2}", theirs / ours);
            }
        }
        for name in ["small_arguments", "catalog_50_tools", "numbers_10k"] {
            if let (Some(ours), Some(plain)) = (
                median_ns(&dir, "identity", "purra_json_identity", name),
                median_ns(&dir, "identity", "serde_json_to_vec", name),
            ) {
                println!("identity {name:<26} purra {ours:>10.0} ns  serde_json::to_vec {plain:>10.0} ns  ratio {:.2}", plain / ours);
            }
        }
    }
}
