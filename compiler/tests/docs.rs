//! Pages generated from the code stay in step with it: the method table of `docs/methods.md`
//! is the registry's ([`topoc::lower::method_table`]). Run with `TOPOC_UPDATE_DOCS=1` to
//! rewrite the page's table after changing the registry.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;

const BEGIN: &str =
    "<!-- the method table: generated from the registry, see compiler/tests/docs.rs -->\n";
const END: &str = "<!-- end of the method table -->";

#[test]
fn the_method_table_is_the_registry() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/methods.md");
    let page = std::fs::read_to_string(&path).unwrap();
    let (head, rest) = page
        .split_once(BEGIN)
        .expect("docs/methods.md has the table's marker");
    let (_, tail) = rest
        .split_once(END)
        .expect("docs/methods.md has the table's end marker");
    let fresh = format!("{head}{BEGIN}{}{END}{tail}", topoc::lower::method_table());
    if std::env::var_os("TOPOC_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &fresh).unwrap();
    }
    assert!(
        page == fresh,
        "docs/methods.md's method table differs from the registry; run \
         `TOPOC_UPDATE_DOCS=1 cargo test -p topoc --test docs`"
    );
}
