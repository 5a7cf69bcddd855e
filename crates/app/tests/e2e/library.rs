//! The application built through the library, in this process: it binds
//! before `build` returns, so port 0 gets ports the system chose, and it
//! says which (C1, C11).

use crate::helpers::*;

#[tokio::test]
async fn port_0_binds_ports_the_system_chose_and_the_application_reports_them_c1_c11() {
    let app = App::start(&[("ADMIN_PORT", "0")]).await;
    let admin_address = app.listening.admin_address.expect("an admin listener");
    let client = &app.client;

    assert_ne!(app.listening.address.port(), 0);
    assert_ne!(admin_address.port(), 0);
    assert_ne!(admin_address, app.listening.address);
    let root = client.get("/").await;
    assert_eq!(root.status(), 200, "the API on the public port");
    let live = Client::at(admin_address.port()).get("/livez").await;
    assert_eq!(live.status(), 200, "the probes on the admin port");
    let not_public = client.get("/livez").await;
    assert_eq!(not_public.status(), 404, "never on the public port (C11)");
}

#[tokio::test]
async fn without_an_admin_port_there_is_no_admin_listener_c11() {
    let app = App::start(&[]).await;

    assert_eq!(app.listening.admin_address, None);
}
