//! Link flags of the command and its tests.

fn main() {
    // Two ISLs live in this process: Polly's, inside libLLVM, and isl-rs's, linked statically.
    // Without this the executable exports its ISL symbols and libLLVM's calls into its own
    // ISL bind to ours (ELF interposition): two different ISL builds mixing data structures,
    // which crashes inside Polly. Hidden, each copy calls itself.
    println!("cargo:rustc-link-arg=-Wl,--exclude-libs,ALL");
}
