//! The `weft` command.

fn main() {
    println!("weft {}", env!("CARGO_PKG_VERSION"));
}
