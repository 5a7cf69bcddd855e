//! A minimal actix-web items server: the baseline of the load benchmark
//! (`bench/run.py load`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};

use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::{App, HttpResponse, HttpServer, web};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

#[derive(Default)]
struct Store {
    items: RwLock<HashMap<i64, String>>,
    last: AtomicI64,
}

#[derive(Serialize)]
struct Item<'a> {
    id: i64,
    name: &'a str,
}

#[derive(Deserialize)]
struct NewItem {
    name: String,
}

async fn root() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .body("Hello World!")
}

/// The headers the service adds to `GET /` with the limiter on (`ETag` C7,
/// `Vary`, `nosniff` C4, `RateLimit-*` C9 at a budget of 1,000,000,000), as
/// constants of the same lengths.
static SERVICE_HEADERS: [(HeaderName, HeaderValue); 7] = [
    (
        header::ETAG,
        HeaderValue::from_static("\"673e3c493921a2d5\""),
    ),
    (header::VARY, HeaderValue::from_static("Origin")),
    (
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    ),
    (
        HeaderName::from_static("ratelimit-policy"),
        HeaderValue::from_static("1000000000;w=900"),
    ),
    (
        HeaderName::from_static("ratelimit-limit"),
        HeaderValue::from_static("1000000000"),
    ),
    (
        HeaderName::from_static("ratelimit-remaining"),
        HeaderValue::from_static("999999999"),
    ),
    (
        HeaderName::from_static("ratelimit-reset"),
        HeaderValue::from_static("1"),
    ),
];

/// `GET /` with [`SERVICE_HEADERS`]: the bytes on the wire with the least
/// work actix-web allows (static names and values, appended), the control of
/// `bench/run.py response_bytes` (`BASELINE_SERVICE_HEADERS=1`).
async fn root_with_service_headers() -> HttpResponse {
    let mut response = root().await;
    for (name, value) in &SERVICE_HEADERS {
        response.headers_mut().append(name.clone(), value.clone());
    }
    response
}

async fn get(store: web::Data<Store>, id: web::Path<i64>) -> HttpResponse {
    let id = id.into_inner();
    match store.items.read().get(&id) {
        Some(name) => HttpResponse::Ok().json(Item { id, name }),
        None => HttpResponse::NotFound().body("Item not found"),
    }
}

async fn list(store: web::Data<Store>) -> HttpResponse {
    let items = store.items.read();
    let mut all: Vec<Item> = items.iter().map(|(&id, name)| Item { id, name }).collect();
    all.sort_by_key(|item| item.id);
    HttpResponse::Ok().json(all)
}

async fn create(store: web::Data<Store>, body: web::Json<NewItem>) -> HttpResponse {
    let id = store.last.fetch_add(1, Ordering::SeqCst) + 1;
    let name = body.into_inner().name;
    let response = HttpResponse::Created().json(Item { id, name: &name });
    store.items.write().insert(id, name);
    response
}

async fn replace(
    store: web::Data<Store>,
    id: web::Path<i64>,
    body: web::Json<NewItem>,
) -> HttpResponse {
    let id = id.into_inner();
    let name = body.into_inner().name;
    let mut items = store.items.write();
    match items.get_mut(&id) {
        Some(current) => {
            let response = HttpResponse::Ok().json(Item { id, name: &name });
            *current = name;
            response
        }
        None => HttpResponse::NotFound().body("Item not found"),
    }
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3001);
    let store = web::Data::new(Store::default());
    let service_headers = std::env::var_os("BASELINE_SERVICE_HEADERS").is_some();
    HttpServer::new(move || {
        let app = App::new().app_data(store.clone());
        let app = if service_headers {
            app.route("/", web::get().to(root_with_service_headers))
        } else {
            app.route("/", web::get().to(root))
        };
        app.route("/items", web::get().to(list))
            .route("/items", web::post().to(create))
            .route("/items/{id}", web::get().to(get))
            .route("/items/{id}", web::put().to(replace))
    })
    .workers(1)
    .bind(("127.0.0.1", port))?
    .run()
    .await
}
