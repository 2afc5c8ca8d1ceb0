//! The few CNI errors the shim prints itself, in the plugin's own format (ts/cni/errors.ts and
//! ts/plugin/main.ts: libcni's PrintResult, four-space JSON, then a newline; exit code 1).

/// The CNI spec's codes the shim uses (numbered as in ts/cni/errors.ts).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ErrorCode {
    InvalidEnvironment = 4,
    InvalidConfig = 7,
    TryAgainLater = 11,
    Internal = 999,
}

/// The version the plugin answers in when the netconf names none it speaks.
pub const LATEST_VERSION: &str = "1.1.0";
/// ts/cni/versions.ts's SUPPORTED_VERSIONS.
const SUPPORTED_VERSIONS: [&str; 7] = ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

#[derive(Debug)]
pub struct CniError {
    pub code: u32,
    pub msg: String,
    pub details: Option<String>,
}

impl CniError {
    pub fn new(code: ErrorCode, msg: impl Into<String>) -> CniError {
        CniError { code: code as u32, msg: msg.into(), details: None }
    }

    pub fn with_details(mut self, details: impl Into<String>) -> CniError {
        self.details = Some(details.into());
        self
    }

    /// The error object as the plugin prints it: keys in its order, JSON.stringify's layout.
    pub fn to_stdout(&self, cni_version: &str) -> String {
        let quote = |text: &str| serde_json::to_string(text).expect("a string serializes");
        let mut out = format!(
            "{{\n    \"cniVersion\": {},\n    \"code\": {},\n    \"msg\": {}",
            quote(cni_version),
            self.code,
            quote(&self.msg)
        );
        if let Some(details) = &self.details {
            out.push_str(&format!(",\n    \"details\": {}", quote(details)));
        }
        out.push_str("\n}\n");
        out
    }
}

/// The netconf's `cniVersion` when stdin parses and names a version the plugin speaks, else the
/// latest (as ts/config/netconf.ts's declaredVersion does for an error before the netconf is valid).
pub fn netconf_version(stdin: &[u8]) -> &'static str {
    let declared = serde_json::from_slice::<serde_json::Value>(stdin).ok();
    let version = declared.as_ref().and_then(|json| json.get("cniVersion")).and_then(|version| version.as_str());
    SUPPORTED_VERSIONS.into_iter().find(|known| Some(*known) == version).unwrap_or(LATEST_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_prints_as_the_plugin_prints_one() {
        let err = CniError::new(ErrorCode::TryAgainLater, "a \"quoted\" é\n");
        assert_eq!(
            err.to_stdout("1.0.0"),
            "{\n    \"cniVersion\": \"1.0.0\",\n    \"code\": 11,\n    \"msg\": \"a \\\"quoted\\\" é\\n\"\n}\n"
        );
        let detailed = CniError::new(ErrorCode::Internal, "m").with_details("d");
        assert_eq!(
            detailed.to_stdout("1.1.0"),
            "{\n    \"cniVersion\": \"1.1.0\",\n    \"code\": 999,\n    \"msg\": \"m\",\n    \"details\": \"d\"\n}\n"
        );
    }

    #[test]
    fn the_version_is_the_netconfs_when_it_names_a_supported_one() {
        assert_eq!(netconf_version(br#"{"cniVersion":"0.3.1","name":"n"}"#), "0.3.1");
        assert_eq!(netconf_version(br#"{"cniVersion":"1.0.0"}"#), "1.0.0");
        assert_eq!(netconf_version(br#"{"cniVersion":"9.9.9"}"#), LATEST_VERSION);
        assert_eq!(netconf_version(br#"{"cniVersion":1}"#), LATEST_VERSION);
        assert_eq!(netconf_version(br#"{"name":"n"}"#), LATEST_VERSION);
        assert_eq!(netconf_version(b"{not json"), LATEST_VERSION);
        assert_eq!(netconf_version(b""), LATEST_VERSION);
        assert_eq!(netconf_version(b"[\"cniVersion\"]"), LATEST_VERSION);
    }
}
