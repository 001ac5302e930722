//! The object stores a table root may name, registered with Delta Lake.
//!
//! Delta Lake knows local directories (`file://`) by itself. [`register`] adds Amazon S3 and
//! S3-compatible stores (`s3://bucket/prefix`, `s3a://…`) through the `object_store` crate's
//! client, so the compactor and every reader open an S3 root through the same code path as a
//! local one. Credentials and the endpoint come from the standard `AWS_*` variables
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, the web-identity variables,
//! `AWS_ENDPOINT_URL` and `AWS_ALLOW_HTTP` for an S3-compatible store), never from a table root.
//!
//! A request is retried up to 3 times within 20 s (the client's default is 10 times within
//! 3 minutes): the compactor retries a failed commit itself, every 2 s, and counts each failure,
//! so an unreachable store shows in its metrics within seconds rather than minutes, and a `candor`
//! answer that cannot read a table says so as quickly.
//!
//! Commits use Delta's default log store: a new log entry is written with a conditional put
//! (`If-None-Match: *`), which S3 and the common S3-compatible stores honour, so two writers
//! racing for one version cannot both win. No DynamoDB lock is needed.

use std::sync::{Arc, Once};
use std::time::Duration;

use deltalake::logstore::object_store::RetryConfig;
use deltalake::logstore::object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use deltalake::logstore::object_store::path::Path;
use deltalake::logstore::{
    LogStore, LogStoreFactory, ObjectStoreFactory, ObjectStoreRef, StorageConfig, default_logstore,
    logstore_factories, object_store_factories,
};
use deltalake::{DeltaResult, DeltaTableError};
use url::Url;

/// The URL schemes [`register`] adds.
pub const S3_SCHEMES: [&str; 2] = ["s3", "s3a"];

/// Registers the S3 store for `s3://` and `s3a://` table roots; later calls do nothing. Call it
/// before opening a table.
pub fn register() {
    static REGISTERED: Once = Once::new();
    REGISTERED.call_once(|| {
        for scheme in S3_SCHEMES {
            let Ok(url) = Url::parse(&format!("{scheme}://")) else {
                continue;
            };
            object_store_factories().insert(url.clone(), Arc::new(S3Factory));
            logstore_factories().insert(url, Arc::new(S3Factory));
        }
    });
}

/// Builds S3 clients for table roots and Delta's default log store over them.
#[derive(Debug, Clone, Copy)]
struct S3Factory;

impl ObjectStoreFactory for S3Factory {
    fn parse_url_opts(
        &self,
        url: &Url,
        config: &StorageConfig,
    ) -> DeltaResult<(ObjectStoreRef, Path)> {
        let retry = RetryConfig {
            max_retries: 3,
            retry_timeout: Duration::from_secs(20),
            ..RetryConfig::default()
        };
        let mut builder = AmazonS3Builder::from_env()
            .with_url(url.as_str())
            .with_retry(retry);
        // Options passed with the table (none in Candor today) win over the environment.
        for (key, value) in &config.raw {
            if let Ok(key) = key.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
                builder = builder.with_config(key, value);
            }
        }
        let store = builder.build().map_err(|err| {
            DeltaTableError::Generic(format!("S3 store for {}: {err}", redacted(url)))
        })?;
        let prefix = Path::from_url_path(url.path()).map_err(|err| {
            DeltaTableError::Generic(format!("S3 path of {}: {err}", redacted(url)))
        })?;
        Ok((Arc::new(store), prefix))
    }
}

impl LogStoreFactory for S3Factory {
    fn with_options(
        &self,
        prefixed_store: ObjectStoreRef,
        root_store: ObjectStoreRef,
        location: &Url,
        options: &StorageConfig,
    ) -> DeltaResult<Arc<dyn LogStore>> {
        Ok(default_logstore(
            prefixed_store,
            root_store,
            location,
            options,
        ))
    }
}

/// The URL without credentials, for an error text.
fn redacted(url: &Url) -> String {
    candor_schema::redact::redact_url(url.as_str()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_s3_root_opens_through_the_registered_store_and_a_bad_one_is_named() {
        register();
        register();
        let url = Url::parse("s3://candor-tables/prefix/outcome_events").unwrap();
        let (_store, prefix) = S3Factory
            .parse_url_opts(&url, &StorageConfig::default())
            .unwrap();
        assert_eq!(prefix.as_ref(), "prefix/outcome_events");
        for scheme in S3_SCHEMES {
            let key = Url::parse(&format!("{scheme}://")).unwrap();
            assert!(object_store_factories().contains_key(&key), "{scheme}");
            assert!(logstore_factories().contains_key(&key), "{scheme}");
        }
        // A setting the client refuses: named, without the credentials of the URL.
        let config = StorageConfig::parse_options([("aws_allow_http", "maybe")]).unwrap();
        let err = S3Factory
            .parse_url_opts(
                &Url::parse("s3://key:secret@candor-tables/x").unwrap(),
                &config,
            )
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("S3 store for s3://"), "{err}");
        assert!(!err.contains("secret"), "{err}");
    }
}
