//! The OpenAPI document (issue 5): it matches the committed
//! `docs/openapi.json`, describes every route the router serves, and renders
//! `docs/api.md`, so neither file can go stale.

use std::collections::BTreeSet;
use std::path::PathBuf;

use items_adapters::http::openapi::{documented_operations, openapi_json};
use items_adapters::http::route_table;
use serde_json::Value;

fn docs(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs")
        .join(file)
}

/// Compares a generated file with the committed one, or rewrites the
/// committed one when `UPDATE_DOCS=1`.
fn assert_committed(file: &str, generated: &str, regenerate: &str) {
    let path = docs(file);
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/{file} is stale: regenerate it with `{regenerate}`"
    );
}

#[test]
fn docs_openapi_json_is_exactly_what_items_service_openapi_prints() {
    // `items-service openapi` prints the document and a newline.
    assert_committed(
        "openapi.json",
        &format!("{}\n", openapi_json()),
        "cargo run -q -p items-app -- openapi > docs/openapi.json",
    );
}

#[test]
fn the_document_is_openapi_3_1_and_describes_every_route_the_router_serves_c7() {
    let document: Value = serde_json::from_str(&openapi_json()).unwrap();
    assert_eq!(document["openapi"], "3.1.0");

    let served: BTreeSet<(String, String)> = route_table()
        .into_iter()
        .flat_map(|(path, methods)| {
            methods
                .into_iter()
                .map(move |method| (path.clone(), method.to_owned()))
        })
        // HEAD and OPTIONS are on every path by construction (C7) and are
        // described once in the document's description, not per operation.
        .filter(|(_, method)| method != "HEAD" && method != "OPTIONS")
        .collect();
    let documented: BTreeSet<(String, String)> = documented_operations().into_iter().collect();

    assert_eq!(documented, served);
}

#[test]
fn every_error_response_in_the_document_is_a_problem_or_the_specs_own_text() {
    let document: Value = serde_json::from_str(&openapi_json()).unwrap();
    for (path, operations) in document["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            for (status, response) in operation["responses"].as_object().unwrap() {
                if !status.starts_with('4') && !status.starts_with('5') {
                    continue;
                }
                let types: Vec<&String> = response["content"].as_object().unwrap().keys().collect();
                let spec_text = status == "404" && path == "/items/{id}";
                let expected = if spec_text {
                    "text/plain"
                } else {
                    "application/problem+json"
                };
                assert_eq!(types, [expected], "{method} {path} {status}");
            }
        }
    }
}

#[test]
fn docs_api_md_is_rendered_from_the_document() {
    let document: Value = serde_json::from_str(&openapi_json()).unwrap();
    assert_committed(
        "api.md",
        &render_guide(&document),
        "UPDATE_DOCS=1 cargo test -p items-adapters --test api openapi",
    );
}

/// A human guide to the API: every operation with a curl example and its
/// responses, in the document's order.
fn render_guide(document: &Value) -> String {
    let mut guide = String::from(
        "# The items-service API\n\n\
         Generated from the OpenAPI document (`docs/openapi.json`, printed by\n\
         `items-service openapi`) by `crates/adapters/tests/api/openapi.rs`;\n\
         a test fails when this file and the document disagree. Regenerate with\n\
         `UPDATE_DOCS=1 cargo test -p items-adapters --test api openapi`.\n\n",
    );
    guide.push_str(document["info"]["description"].as_str().unwrap_or_default());
    guide.push_str("\n\nThe examples assume `B=http://localhost:3000`.\n");
    for (path, operations) in document["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            let method = method.to_uppercase();
            let summary = operation["summary"].as_str().unwrap_or_default();
            guide.push_str(&format!("\n## `{method} {path}`\n\n{summary}.\n\n"));
            guide.push_str(&format!(
                "```sh\n{}\n```\n",
                curl(&method, path, operation, document)
            ));
            if let Some(parameters) = operation["parameters"].as_array() {
                guide
                    .push_str("\n| parameter | in | required | description |\n|---|---|---|---|\n");
                for parameter in parameters {
                    guide.push_str(&format!(
                        "| `{}` | {} | {} | {} |\n",
                        parameter["name"].as_str().unwrap_or_default(),
                        parameter["in"].as_str().unwrap_or_default(),
                        if parameter["required"].as_bool().unwrap_or(false) {
                            "yes"
                        } else {
                            "no"
                        },
                        parameter["description"].as_str().unwrap_or_default(),
                    ));
                }
            }
            guide.push_str("\n| status | meaning | body |\n|---|---|---|\n");
            for (status, response) in operation["responses"].as_object().unwrap() {
                let body = response["content"]
                    .as_object()
                    .map(|content| {
                        content
                            .keys()
                            .map(|kind| format!("`{kind}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .filter(|body| !body.is_empty())
                    .unwrap_or_else(|| "none".to_owned());
                let meaning = response["description"]
                    .as_str()
                    .unwrap_or_default()
                    .replace('|', "\\|");
                guide.push_str(&format!("| {status} | {meaning} | {body} |\n"));
            }
        }
    }
    guide
}

/// A curl command for an operation, with an example body built from its
/// request schema.
fn curl(method: &str, path: &str, operation: &Value, document: &Value) -> String {
    let url = path.replace("{id}", "1");
    let query = if path == "/hello" { "?person=Ada" } else { "" };
    let mut command = match method {
        "GET" => format!("curl -i \"$B{url}{query}\""),
        other => format!("curl -i -X {other} \"$B{url}\""),
    };
    let Some(content) = operation["requestBody"]["content"].as_object() else {
        return command;
    };
    for (kind, media) in content {
        let schema = resolve(&media["schema"], document);
        let fields: Vec<(&String, &Value)> = schema["properties"]
            .as_object()
            .map(|p| p.iter().collect())
            .unwrap_or_default();
        match kind.as_str() {
            "application/json" => {
                let example: serde_json::Map<String, Value> = fields
                    .iter()
                    .map(|(name, field)| ((*name).clone(), example_value(field)))
                    .collect();
                command.push_str(&format!(
                    " \\\n  -H 'content-type: application/json' -d '{}'",
                    Value::Object(example)
                ));
            }
            "application/x-www-form-urlencoded" => {
                for (name, _) in fields {
                    command.push_str(&format!(" -d {name}=ada"));
                }
            }
            "multipart/form-data" => {
                for (name, field) in fields {
                    let copies = if field["type"] == "array" { 2 } else { 1 };
                    for copy in 0..copies {
                        command.push_str(&format!(" \\\n  -F {name}=@picture{copy}.png"));
                    }
                }
                command.push_str(" -F note=hello");
            }
            _ => {}
        }
    }
    command
}

fn resolve<'a>(schema: &'a Value, document: &'a Value) -> &'a Value {
    match schema["$ref"]
        .as_str()
        .and_then(|reference| reference.rsplit('/').next())
    {
        Some(name) => &document["components"]["schemas"][name],
        None => schema,
    }
}

fn example_value(field: &Value) -> Value {
    match field["type"].as_str() {
        Some("integer") => Value::from(1),
        Some("number") => Value::from(1.5),
        _ => Value::from("pen"),
    }
}
