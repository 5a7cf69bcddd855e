//! A TechEmpower-style items server over PostgreSQL: actix-web with one
//! tokio-postgres connection per worker. The queries of all the requests in
//! flight on a worker share its one `Client`, which writes each statement as
//! it comes without waiting for the previous answers: they are pipelined.
//! The comparison of `bench/run.py pg_cpu`.
//!
//! - `GET /items/{id}`: `select id, name from items where id = $1`, 200
//!   `{"id":..,"name":..}` or 404;
//! - `POST /items` `{"name":..}`: `insert into items (name) values ($1)
//!   returning id`, 201 with the item and `Location: /items/{id}`.
//!
//! Both statements are prepared once per connection. The schema is the
//! service's (`crates/adapters/migrations`): names are UTF-8 in `bytea`.
//! Settings: `DATABASE_URL` (required) and `PORT` (0 for any free port);
//! it listens on 127.0.0.1 with one worker per CPU of its affinity mask.

use std::num::NonZeroUsize;

use actix_web::http::header;
use actix_web::{App, HttpResponse, HttpServer, web};
use serde::{Deserialize, Serialize};
use tokio_postgres::{Client, NoTls, Statement};

/// A worker's connection and its prepared statements.
struct Database {
    client: Client,
    get: Statement,
    create: Statement,
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

/// Names are 1 to 1024 bytes (the table's check constraint).
const NAME_BYTES: std::ops::RangeInclusive<usize> = 1..=1024;

async fn connect(url: &str) -> Result<Database, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    // The connection's task runs on this worker's own (single-threaded)
    // runtime, as the handlers do.
    actix_web::rt::spawn(async move {
        if let Err(error) = connection.await {
            eprintln!("database connection: {error}");
        }
    });
    let get = client
        .prepare("select id, name from items where id = $1")
        .await?;
    let create = client
        .prepare("insert into items (name) values ($1) returning id")
        .await?;
    Ok(Database {
        client,
        get,
        create,
    })
}

async fn get(database: web::Data<Database>, id: web::Path<i64>) -> HttpResponse {
    let id = id.into_inner();
    match database.client.query_opt(&database.get, &[&id]).await {
        Ok(Some(row)) => match std::str::from_utf8(row.get::<_, &[u8]>(1)) {
            Ok(name) => HttpResponse::Ok().json(Item {
                id: row.get(0),
                name,
            }),
            Err(_) => HttpResponse::InternalServerError().finish(),
        },
        Ok(None) => HttpResponse::NotFound().body("Item not found"),
        Err(_) => HttpResponse::InternalServerError().finish(),
    }
}

async fn create(database: web::Data<Database>, body: web::Json<NewItem>) -> HttpResponse {
    let name = body.into_inner().name;
    if !NAME_BYTES.contains(&name.len()) {
        return HttpResponse::UnprocessableEntity().body("name must be 1 to 1024 bytes");
    }
    let bytes: &[u8] = name.as_bytes();
    match database.client.query_one(&database.create, &[&bytes]).await {
        Ok(row) => {
            let id: i64 = row.get(0);
            HttpResponse::Created()
                .insert_header((header::LOCATION, format!("/items/{id}")))
                .json(Item { id, name: &name })
        }
        Err(_) => HttpResponse::InternalServerError().finish(),
    }
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("DATABASE_URL is not set");
        std::process::exit(2);
    };
    let port: u16 = match std::env::var("PORT") {
        Ok(port) => port.parse().unwrap_or_else(|_| {
            eprintln!("PORT is not a port number: {port:?}");
            std::process::exit(2);
        }),
        Err(_) => 3002,
    };
    // Fail at once, rather than in every worker, when the database cannot
    // be reached or has no `items` table.
    if let Err(error) = connect(&url).await {
        eprintln!("cannot use the database: {error}");
        std::process::exit(1);
    }
    // Linux: the CPUs of the affinity mask (`taskset -c 0`: one worker).
    let workers = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    HttpServer::new(move || {
        let url = url.clone();
        App::new()
            // Runs once per worker, on its runtime: one connection each.
            .data_factory(move || {
                let url = url.clone();
                async move { connect(&url).await }
            })
            .route("/items", web::post().to(create))
            .route("/items/{id}", web::get().to(get))
    })
    .workers(workers)
    .bind(("127.0.0.1", port))?
    .run()
    .await
}
