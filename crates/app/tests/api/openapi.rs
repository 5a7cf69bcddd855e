//! The OpenAPI document: it matches the committed
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
    // `items-service openapi` prints the document, its newline included.
    assert!(openapi_json().ends_with("}\n"));
    assert_committed(
        "openapi.json",
        &openapi_json(),
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
fn every_parameter_and_request_body_has_an_example_for_schemathesis_and_readers() {
    let document: Value = serde_json::from_str(&openapi_json()).unwrap();
    for (path, operations) in document["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            for parameter in operation["parameters"].as_array().into_iter().flatten() {
                assert!(
                    example_of(&parameter["schema"]).is_some(),
                    "{method} {path}: parameter {} has no example",
                    parameter["name"]
                );
            }
            for (kind, media) in operation["requestBody"]["content"]
                .as_object()
                .into_iter()
                .flatten()
            {
                assert!(
                    example_of(resolve(&media["schema"], &document)).is_some(),
                    "{method} {path}: the {kind} body has no example"
                );
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
        "UPDATE_DOCS=1 cargo test -p items-app --test api openapi",
    );
}

/// A human guide to the API: every operation with a curl example, its
/// parameters with their limits, its responses with their headers and body
/// shapes, then every body shape field by field, in the document's order.
fn render_guide(document: &Value) -> String {
    let mut guide = String::from(
        "# The items-service API\n\n\
         Generated from the OpenAPI document (`docs/openapi.json`, printed by\n\
         `items-service openapi`) by `crates/app/tests/api/openapi.rs`;\n\
         a test fails when this file and the document disagree. Regenerate with\n\
         `UPDATE_DOCS=1 cargo test -p items-app --test api openapi`.\n\
         Rule labels (C1–C14, spec §N) are stated in `docs/contract.md`.\n\n",
    );
    guide.push_str(document["info"]["description"].as_str().unwrap_or_default());
    let everywhere = headers_on_every_response(document);
    if !everywhere.is_empty() {
        guide.push_str("\n\nEvery response also carries:\n\n");
        for (name, description) in &everywhere {
            guide.push_str(&format!("- `{name}`: {description}\n"));
        }
    }
    guide.push_str("\nThe examples assume `B=http://localhost:3000`.\n");
    for (path, operations) in document["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            let method = method.to_uppercase();
            let summary = operation["summary"].as_str().unwrap_or_default();
            guide.push_str(&format!("\n## `{method} {path}`\n\n{summary}.\n\n"));
            if let Some(description) = operation["description"].as_str() {
                guide.push_str(&format!("{}\n\n", description.trim_end()));
            }
            guide.push_str(&format!(
                "```sh\n{}\n```\n",
                curl(&method, path, operation, document)
            ));
            if let Some(parameters) = operation["parameters"].as_array() {
                guide.push_str(
                    "\n| parameter | in | required | values | description |\n|---|---|---|---|---|\n",
                );
                for parameter in parameters {
                    guide.push_str(&format!(
                        "| `{}` | {} | {} | {} | {} |\n",
                        parameter["name"].as_str().unwrap_or_default(),
                        parameter["in"].as_str().unwrap_or_default(),
                        if parameter["required"].as_bool().unwrap_or(false) {
                            "yes"
                        } else {
                            "no"
                        },
                        shape(&parameter["schema"]),
                        cell(&parameter["description"]),
                    ));
                }
            }
            if let Some(body) = operation["requestBody"]["content"].as_object() {
                guide.push_str("\nRequest body: ");
                guide.push_str(&bodies(body));
                guide.push_str(".\n");
            }
            guide.push_str("\n| status | meaning | headers | body |\n|---|---|---|---|\n");
            for (status, response) in operation["responses"].as_object().unwrap() {
                let body = response["content"]
                    .as_object()
                    .map(bodies)
                    .filter(|body| !body.is_empty())
                    .unwrap_or_else(|| "none".to_owned());
                let headers: Vec<String> = response["headers"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(name, _)| !everywhere.iter().any(|(common, _)| common == *name))
                    .map(|(name, header)| format!("`{name}`: {}", cell(&header["description"])))
                    .collect();
                let headers = if headers.is_empty() {
                    "".to_owned()
                } else {
                    headers.join("; ")
                };
                guide.push_str(&format!(
                    "| {status} | {} | {headers} | {body} |\n",
                    cell(&response["description"])
                ));
            }
        }
    }
    guide.push_str("\n## Bodies\n");
    for (name, schema) in document["components"]["schemas"].as_object().unwrap() {
        guide.push_str(&format!("\n### {name}\n\n"));
        if let Some(description) = schema["description"].as_str() {
            guide.push_str(&format!("{description}\n\n"));
        }
        match schema["properties"].as_object() {
            Some(properties) => {
                let required: Vec<&str> = schema["required"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                guide.push_str("| field | values | required | description |\n|---|---|---|---|\n");
                for (field, property) in properties {
                    guide.push_str(&format!(
                        "| `{field}` | {} | {} | {} |\n",
                        shape(property),
                        if required.contains(&field.as_str()) {
                            "yes"
                        } else {
                            "no"
                        },
                        cell(&property["description"]),
                    ));
                }
                if schema["additionalProperties"] == Value::Bool(true) {
                    guide.push_str("| any other name | any value | no | |\n");
                }
            }
            None => guide.push_str(&format!("{}\n", shape(schema))),
        }
        if let Some(example) = example_of(schema) {
            guide.push_str(&format!("\nExample: `{example}`\n"));
        }
    }
    guide
}

/// The headers that every response of every operation carries, with their
/// descriptions (the `RateLimit-*` headers): listed once, not per response.
fn headers_on_every_response(document: &Value) -> Vec<(String, String)> {
    let responses: Vec<&Value> = document["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|operations| operations.as_object().unwrap().values())
        .flat_map(|operation| operation["responses"].as_object().unwrap().values())
        .collect();
    let Some(first) = responses.first() else {
        return Vec::new();
    };
    first["headers"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(name, _)| {
            responses
                .iter()
                .all(|response| response["headers"].get(name.as_str()).is_some())
        })
        .map(|(name, header)| (name.clone(), cell(&header["description"])))
        .collect()
}

/// Media types and what they hold: "`application/json`: [Item](#item)".
fn bodies(content: &serde_json::Map<String, Value>) -> String {
    content
        .iter()
        .map(|(kind, media)| match media.get("schema") {
            Some(schema) if !schema.is_null() => format!("`{kind}`: {}", shape(schema)),
            _ => format!("`{kind}`"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A schema in a few words: its type or a link to its body shape, then its
/// limits (`1–256 characters`, `≥ 0`, `pattern …`, `1–12 items`).
fn shape(schema: &Value) -> String {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.rsplit('/').next().unwrap_or_default();
        return format!("[{name}](#{})", name.to_lowercase());
    }
    if let Some(choices) = schema["oneOf"].as_array() {
        return choices.iter().map(shape).collect::<Vec<_>>().join(" or ");
    }
    let kind = match &schema["type"] {
        Value::String(kind) => kind.clone(),
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".to_owned(),
    };
    let mut words = vec![match kind.as_str() {
        "array" => format!("array of {}", shape(&schema["items"])),
        _ => kind,
    }];
    if let Some(values) = schema["enum"].as_array() {
        let values: Vec<String> = values.iter().map(|value| format!("`{value}`")).collect();
        words.push(format!("one of {}", values.join(", ")));
    }
    let range =
        |low: &str, high: &str, unit: &str| match (schema[low].as_u64(), schema[high].as_u64()) {
            (Some(low), Some(high)) => Some(format!("{low}–{high}{unit}")),
            (Some(1), None) if unit == " characters" => Some("not empty".to_owned()),
            (Some(low), None) => Some(format!("at least {low}{unit}")),
            (None, Some(high)) => Some(format!("at most {high}{unit}")),
            (None, None) => None,
        };
    words.extend(range("minLength", "maxLength", " characters"));
    words.extend(range("minItems", "maxItems", " items"));
    match (&schema["minimum"], &schema["maximum"]) {
        (Value::Null, Value::Null) => {}
        (low, Value::Null) => words.push(format!("≥ {low}")),
        (Value::Null, high) => words.push(format!("≤ {high}")),
        (low, high) => words.push(format!("{low}–{high}")),
    }
    if let Some(pattern) = schema["pattern"].as_str() {
        words.push(format!("pattern `{pattern}`"));
    }
    if let Some(format) = schema["format"].as_str() {
        words.push(format!("({format})"));
    }
    if let Some(example) = example_of(schema) {
        words.push(format!("e.g. `{example}`"));
    }
    words.join(", ").replace('|', "\\|")
}

/// The schema's example (`examples` in OpenAPI 3.1, `example` before).
fn example_of(schema: &Value) -> Option<&Value> {
    schema["examples"]
        .as_array()
        .and_then(|all| all.first())
        .or_else(|| schema.get("example"))
}

/// A description made safe for a table cell.
fn cell(description: &Value) -> String {
    description
        .as_str()
        .unwrap_or_default()
        .replace('\n', " ")
        .replace('|', "\\|")
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
