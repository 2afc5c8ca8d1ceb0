//! The golden files are nft's own bytes: each case's ruleset is loaded with `nft --debug=mnl -f`
//! in a private namespace and what nft sends is compared with tests/golden/<case>.hex. With
//! NETPLUG_GOLDEN_WRITE=1 the files are written from nft instead (then golden_bytes.rs shows
//! where our encoder differs).

mod common;

#[test]
fn golden_files_hold_what_nft_sends() {
    common::require_root();
    let write = std::env::var_os("NETPLUG_GOLDEN_WRITE").is_some();
    for case in common::cases() {
        let theirs = common::nft_batch(&case.nft);
        if write {
            common::write_fixture(&case.name, &theirs);
            continue;
        }
        let fixture = common::read_fixture(&case.name);
        common::assert_same(&case.name, &fixture, &theirs);
    }
}
