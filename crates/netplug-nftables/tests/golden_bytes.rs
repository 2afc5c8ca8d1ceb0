//! The encoder against golden bytes: for each case in tests/golden/cases.json, the messages our
//! encoder builds for the description equal, byte for byte, those `nft` 1.0.6 sends for the
//! same ruleset (captured with `nft --debug=mnl` into tests/golden/<case>.hex; golden_nft.rs
//! captures them again and checks the files are current).

mod common;

#[test]
fn every_case_encodes_as_nft_encodes_it() {
    let cases = common::cases();
    assert!(cases.len() >= 10);
    for case in cases {
        let ours = common::encode(&case.table);
        let theirs = common::read_fixture(&case.name);
        common::assert_same(&case.name, &ours, &theirs);
    }
}
