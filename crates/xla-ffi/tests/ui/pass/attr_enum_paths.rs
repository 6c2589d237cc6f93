// `#[derive(AttrEnum)]` with the crate renamed, keyword variant names, and user
// items named like the prelude's in scope (the generated paths are absolute).
extern crate xla_ffi as renamed;

#[allow(dead_code)]
struct String;
#[allow(dead_code)]
enum Result {}
#[allow(dead_code)]
struct Option;

#[derive(renamed::AttrEnum)]
#[attr_enum(crate = "renamed")]
#[repr(u8)]
enum Kind {
    r#Type = 3,
    Plain = 250,
}

fn main() {
    let _ = <Kind as renamed::FromAttr<'static>>::expected();
    let _ = (Kind::r#Type, Kind::Plain);
}
