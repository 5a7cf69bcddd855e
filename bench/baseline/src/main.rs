//! A minimal actix-web items server: the baseline of `bench/run.py`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};

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
    HttpResponse::Ok().content_type("text/plain; charset=utf-8").body("Hello World!")
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

async fn replace(store: web::Data<Store>, id: web::Path<i64>, body: web::Json<NewItem>) -> HttpResponse {
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
    let port: u16 = std::env::var("PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(3001);
    let store = web::Data::new(Store::default());
    HttpServer::new(move || {
        App::new()
            .app_data(store.clone())
            .route("/", web::get().to(root))
            .route("/items", web::get().to(list))
            .route("/items", web::post().to(create))
            .route("/items/{id}", web::get().to(get))
            .route("/items/{id}", web::put().to(replace))
    })
    .workers(1)
    .bind(("127.0.0.1", port))?
    .run()
    .await
}
