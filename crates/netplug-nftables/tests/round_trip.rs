//! Every construct of the vocabulary round-trips through the kernel: each golden case is written
//! over netlink by the table writer in a private namespace, listed with `nft -j list table`,
//! read back into a description, and compared with the one written.

mod common;

use common::TestNs;
use common::listing::{canonical, table_from_listing};
use netplug_nftables::TableWriter;

#[test]
fn every_construct_written_lists_back_as_written() {
    for case in common::cases() {
        let ns = TestNs::new();
        let table = case.table.clone();
        let mut writer = TableWriter::new(table.family, &table.name);
        let report = ns.enter(|| writer.apply(table)).unwrap_or_else(|err| panic!("case {}: {err}", case.name));
        assert!(report.replaced);
        let listing = ns.nft_json(case.table.family.name(), &case.table.name);
        let listed = table_from_listing(&listing);
        assert_eq!(canonical(&listed), canonical(&case.table), "case {}: nft lists {listing}", case.name);
        // nft's text listing reads back into the same table: it lists the rules cleanly.
        let text = ns.nft(&["list", "table", case.table.family.name(), &case.table.name]);
        let again = TestNs::new();
        let file = std::env::temp_dir().join(format!("netplug-round-trip-{}-{}.nft", std::process::id(), case.name));
        std::fs::write(&file, &text).unwrap();
        again.nft(&["-f", file.to_str().unwrap()]);
        let _ = std::fs::remove_file(&file);
        let relisted = table_from_listing(&again.nft_json(case.table.family.name(), &case.table.name));
        assert_eq!(canonical(&relisted), canonical(&case.table), "case {}: nft's text listing:\n{text}", case.name);
    }
}
