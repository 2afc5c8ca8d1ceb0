//! Network sysctls under `/proc/sys/net`, which resolve against the calling thread's namespace.

use std::fs::OpenOptions;
use std::io::Write;

use crate::error::{DataplaneError, Result};

/// Writes `value` to `/proc/sys/<key>` (key with slashes, e.g. `net/ipv4/conf/eth0/proxy_arp`)
/// in one `write`, as the kernel's sysctl handlers expect.
pub fn write(key: &str, value: &str) -> Result<()> {
    let op = || format!("set {}={}", dotted(key), value);
    let mut file = OpenOptions::new()
        .write(true)
        .open(format!("/proc/sys/{key}"))
        .map_err(|err| DataplaneError::from_io(op(), &err))?;
    file.write_all(value.as_bytes()).map_err(|err| DataplaneError::from_io(op(), &err))
}

/// Reads `/proc/sys/<key>`, trimmed.
pub fn read(key: &str) -> Result<String> {
    std::fs::read_to_string(format!("/proc/sys/{key}"))
        .map(|value| value.trim().to_string())
        .map_err(|err| DataplaneError::from_io(format!("read {}", dotted(key)), &err))
}

/// `net/ipv4/conf/eth0.1/proxy_arp` → `net.ipv4.conf.eth0/1.proxy_arp`, sysctl(8)'s spelling.
fn dotted(key: &str) -> String {
    key.split('/').map(|part| part.replace('.', "/")).collect::<Vec<_>>().join(".")
}
