//! Regenerates `evidence/testdata/vectors.json`:
//! `cargo run -p audita-evidence --example gen_vectors`.

#[path = "../testdata/gen.rs"]
mod gen;

fn main() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/vectors.json");
    let text = serde_json::to_string_pretty(&gen::vectors()).expect("vectors serialize") + "\n";
    std::fs::write(path, text).expect("write vectors.json");
    eprintln!("wrote {path}");
}
