use super::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn refusal(role: Role<'_>, extra: &[(&str, &str)], extra_env: &[(&str, &str)]) -> String {
    ExtraSettings::validate(role, map(extra), map(extra_env))
        .unwrap_err()
        .to_string()
}

const ROLES: [Role<'static>; 3] = [Role::Producer, Role::Consumer, Role::Reader { owned: &[] }];

#[test]
fn refusals_name_the_key_and_the_value() {
    assert_eq!(
        refusal(Role::Producer, &[("enable.idempotence", "false")], &[]),
        "invalid kafka.extra.\"enable.idempotence\" = \"false\": cannot be overridden: clients \
         get an answer only after an idempotent, acks=all delivery"
    );
    assert_eq!(
        refusal(Role::Producer, &[], &[("acks", "ACKS")]),
        "invalid kafka.extra_env.\"acks\" = \"ACKS\": cannot be overridden: clients get an answer \
         only after an idempotent, acks=all delivery"
    );
    assert_eq!(
        refusal(Role::Consumer, &[("enable.auto.commit", "true")], &[]),
        "invalid kafka.extra.\"enable.auto.commit\" = \"true\": cannot be overridden: the \
         compactor's offsets live in the table, Kafka's are a hint"
    );
    assert_eq!(
        refusal(
            Role::Reader { owned: &[] },
            &[("bootstrap.servers", "h:1")],
            &[]
        ),
        "invalid kafka.extra.\"bootstrap.servers\" = \"h:1\": set by --kafka"
    );
    assert_eq!(
        refusal(
            Role::Producer,
            &[("sasl.username", "u")],
            &[("sasl.username", "USER_VAR")]
        ),
        "invalid kafka.extra_env.\"sasl.username\" = \"USER_VAR\": kafka.extra.\"sasl.username\" \
         is set too"
    );
}

#[test]
fn every_role_refuses_its_own_settings_and_the_brokers() {
    for role in ROLES {
        for brokers in ["bootstrap.servers", "metadata.broker.list"] {
            assert!(role.reserved(brokers).is_some(), "{role:?} {brokers}");
        }
        assert_eq!(role.reserved("security.protocol"), None, "{role:?}");
    }
    for name in [
        "enable.idempotence",
        "acks",
        "request.required.acks",
        "compression.type",
        "compression.codec",
        "compression.level",
        "delivery.timeout.ms",
        "message.timeout.ms",
        "queue.buffering.max.messages",
    ] {
        assert!(Role::Producer.reserved(name).is_some(), "{name}");
    }
    for name in [
        "enable.auto.commit",
        "enable.auto.offset.store",
        "auto.offset.reset",
        "isolation.level",
        "partition.assignment.strategy",
        "group.protocol",
        "client.id",
        "statistics.interval.ms",
        "group.id",
        "session.timeout.ms",
    ] {
        assert!(Role::Consumer.reserved(name).is_some(), "{name}");
    }
    for name in READER_OWNED {
        let reason = Role::Reader { owned: &[] }.reserved(name);
        assert_eq!(reason, Some(READER_REASON), "{name}");
    }
    // A program's own reason wins over the readers' shared one.
    let dashboards = Role::Reader {
        owned: &[("group.id", "set by --group")],
    };
    assert_eq!(dashboards.reserved("group.id"), Some("set by --group"));
    // The compression of a reader or of the compactor is its own business.
    assert_eq!(Role::Consumer.reserved("compression.type"), None);
}

#[test]
fn secrets_are_refused_in_extra_and_never_shown() {
    for role in ROLES {
        for secret in [
            "sasl.password",
            "ssl.key.password",
            "sasl.oauthbearer.client.secret",
            "ssl.key.pem",
        ] {
            let err = refusal(role, &[(secret, "hunter2")], &[]);
            assert_eq!(
                err,
                format!(
                    "invalid kafka.extra.{secret:?} = \"(not shown)\": a secret: name the \
                     variable holding it in kafka.extra_env instead"
                )
            );
        }
    }
    // A reserved setting's value is not shown either when the name says it is a secret.
    let owned = Role::Reader {
        owned: &[("sasl.password", "set by --password")],
    };
    let err = refusal(owned, &[("sasl.password", "hunter2")], &[]);
    assert!(
        err.contains("(not shown)") && !err.contains("hunter2"),
        "{err}"
    );
    // Named by a variable, it is accepted.
    let env = ExtraSettings::validate(
        Role::Producer,
        BTreeMap::new(),
        map(&[("sasl.password", "CANDOR_KAFKA_PASSWORD")]),
    );
    assert_eq!(env.map(|s| s.extra_env().len()), Ok(1));
}

#[test]
fn variable_names_are_portable_and_not_echoed() {
    for good in ["A", "_X", "CANDOR_KAFKA_PASSWORD", "a1"] {
        assert_eq!(env_var_name("k", good), Ok(()), "{good}");
    }
    for bad in ["", "1A", "hunter 2", "A-B", "s3cr3t!", "É"] {
        let err = env_var_name("otlp.auth_token_env", bad)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "invalid otlp.auth_token_env = \"(not shown)\": expected the name of an environment \
             variable (letters, digits, _)"
        );
    }
    let err = refusal(Role::Producer, &[], &[("sasl.password", "hunter 4")]);
    assert!(
        err.starts_with("invalid kafka.extra_env.\"sasl.password\" = \"(not shown)\": ")
            && !err.contains("hunter 4"),
        "{err}"
    );
    // Refused for another reason first, a value that is no variable name is still not shown.
    let err = refusal(Role::Producer, &[], &[("acks", "hunter 5")]);
    assert!(!err.contains("hunter 5"), "{err}");
    let err = refusal(Role::Producer, &[("a.b", "v")], &[("a.b", "hunter 6")]);
    assert!(!err.contains("hunter 6"), "{err}");
}

#[test]
fn variables_are_read_once_and_must_hold_a_value() {
    let settings = ExtraSettings::validate(
        Role::Producer,
        map(&[("security.protocol", "SASL_SSL")]),
        map(&[("sasl.password", "PASSWORD_VAR")]),
    )
    .unwrap();
    let mut reads = Vec::new();
    let resolved = settings
        .resolve_with(|var| {
            reads.push(var.to_owned());
            Some("hunter2".to_owned())
        })
        .unwrap();
    assert_eq!(reads, ["PASSWORD_VAR"]);
    let mut config = ClientConfig::new();
    resolved.apply(&mut config);
    assert_eq!(config.get("security.protocol"), Some("SASL_SSL"));
    assert_eq!(config.get("sasl.password"), Some("hunter2"));
    for unset in [None, Some(String::new())] {
        let err = settings.resolve_with(|_| unset.clone()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "kafka.extra_env.\"sasl.password\" names PASSWORD_VAR, which is unset or empty"
        );
    }
}

#[test]
fn debug_redacts_what_came_from_the_environment() {
    let settings = ExtraSettings::validate(
        Role::Consumer,
        map(&[("security.protocol", "SASL_SSL")]),
        map(&[("sasl.password", "PASSWORD_VAR")]),
    )
    .unwrap();
    let resolved = settings
        .resolve_with(|_| Some("hunter2".to_owned()))
        .unwrap();
    let shown = format!("{resolved:?}");
    assert_eq!(
        shown,
        "ClientSettings { settings: [(\"sasl.password\", \"<redacted>\"), (\"security.protocol\", \
         \"SASL_SSL\")] }"
    );
    // The validated tables hold the variable's name, never its value.
    assert!(!format!("{settings:?}").contains("hunter2"));
}

#[test]
fn empty_tables_add_nothing() {
    for role in ROLES {
        let settings = ExtraSettings::validate(role, BTreeMap::new(), BTreeMap::new()).unwrap();
        assert!(settings.is_empty());
        assert!(settings.resolve().unwrap().is_empty());
    }
}

/// Every setting a builder makes is either refused in a file by its role, or one the file's
/// value replaces: no file setting is silently overwritten, and none the builder relies on is
/// accepted.
fn assert_builder_and_role_agree(role: Role<'_>, build: impl Fn(&ClientSettings) -> ClientConfig) {
    let own = build(&ClientSettings::default());
    let settings = own.config_map();
    assert!(!settings.is_empty());
    for &name in settings.keys() {
        if role.reserved(name).is_some() {
            continue;
        }
        let extra = ExtraSettings::validate(role, map(&[(name, "from-file")]), BTreeMap::new())
            .unwrap_or_else(|err| panic!("{name}: {err}"))
            .resolve_with(|_| None)
            .unwrap();
        assert_eq!(
            build(&extra).get(name),
            Some("from-file"),
            "{name} is set by the builder over the file's value, but not refused by {role:?}"
        );
    }
}

#[test]
fn each_builder_sets_only_what_its_role_refuses_or_the_file_may_change() {
    let producer = |extra: &ClientSettings| ProducerSettings {
        bootstrap_servers: "k:9092".into(),
        delivery_timeout: std::time::Duration::from_secs(5),
        queue_max_messages: 10,
        compression: Compression::Zstd,
        compression_level: Some(1),
        client_id: "c".into(),
        extra: extra.clone(),
    };
    assert_builder_and_role_agree(Role::Producer, |extra| producer(extra).producer_config());
    assert_builder_and_role_agree(Role::Producer, |extra| producer(extra).admin_config());
    assert_builder_and_role_agree(Role::Consumer, |extra| {
        GroupConsumerSettings {
            bootstrap_servers: "k:9092".into(),
            group_id: "g".into(),
            session_timeout: std::time::Duration::from_secs(6),
            client_id: "c".into(),
            statistics_interval: std::time::Duration::from_secs(5),
            extra: extra.clone(),
        }
        .config()
    });
    for stops_at_end in [false, true] {
        let reader = Reader {
            bootstrap_servers: "k:9092",
            id: "candor-reader",
            reset: OffsetReset::Earliest,
            stops_at_end,
        };
        assert_builder_and_role_agree(Role::Reader { owned: &[] }, |extra| reader.config(extra));
    }
}

#[test]
fn a_reader_sets_every_setting_readers_keep_for_themselves() {
    let reader = Reader {
        bootstrap_servers: "k:9092",
        id: "candor-reader",
        reset: OffsetReset::Error,
        stops_at_end: true,
    };
    let config = reader.config(&ClientSettings::default());
    for name in READER_OWNED {
        assert!(config.get(name).is_some(), "{name} is not set");
    }
    assert_eq!(config.get("auto.offset.reset"), Some("error"));
}

#[test]
fn the_producer_keeps_its_guarantee_whatever_the_file_says() {
    let settings = ProducerSettings {
        bootstrap_servers: "k:9092".into(),
        delivery_timeout: std::time::Duration::from_millis(1500),
        queue_max_messages: 7,
        compression: Compression::Lz4,
        compression_level: None,
        client_id: "c".into(),
        extra: ClientSettings::default(),
    };
    let config = settings.producer_config();
    assert_eq!(config.get("enable.idempotence"), Some("true"));
    assert_eq!(config.get("acks"), Some("all"));
    assert_eq!(config.get("compression.type"), Some("lz4"));
    assert_eq!(config.get("compression.level"), None);
    assert_eq!(config.get("message.timeout.ms"), Some("1500"));
    assert_eq!(config.get("queue.buffering.max.messages"), Some("7"));
}
