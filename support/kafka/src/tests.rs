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

const PRODUCER: ProducerDefaults<'static> = ProducerDefaults {
    brokers: "127.0.0.1:9092",
    create_topics: true,
    partitions: 3,
    replication_factor: 1,
    delivery_timeout: "5s",
    queue_max_messages: 100_000,
    compression: "zstd",
};

const GROUP_CONSUMER: GroupConsumerDefaults<'static> = GroupConsumerDefaults {
    brokers: "127.0.0.1:9092",
    group_id: "candor-compactor",
    session_timeout: "6s",
};

const READER: ReaderDefaults<'static> = ReaderDefaults {
    program: "candor-dashboards",
    brokers: "127.0.0.1:9092",
    group_id: "candor-dashboards",
    owned: &[("group.id", "set by kafka.group_id (--group)")],
};

/// `[kafka]` as a configuration file writes it.
fn section(text: &str) -> KafkaSection {
    toml::from_str(text).unwrap()
}

#[test]
fn each_role_takes_its_defaults_from_the_role() {
    let producer = KafkaSection::default().producer(&PRODUCER).unwrap();
    assert_eq!(producer.bootstrap_servers(), "127.0.0.1:9092");
    assert!(producer.create_topics);
    assert_eq!(
        [
            producer.partitions.get(),
            producer.replication_factor.get(),
            producer.queue_max_messages.get()
        ],
        [3, 1, 100_000]
    );
    assert_eq!(producer.delivery_timeout, std::time::Duration::from_secs(5));
    assert_eq!(producer.compression, Compression::Zstd);
    assert_eq!(producer.compression_level, Some(1), "zstd's level left out");
    assert!(producer.extra.is_empty());

    let consumer = KafkaSection::default()
        .group_consumer(&GROUP_CONSUMER)
        .unwrap();
    assert_eq!(consumer.bootstrap_servers(), "127.0.0.1:9092");
    assert_eq!(consumer.group_id, "candor-compactor");
    assert_eq!(consumer.session_timeout, std::time::Duration::from_secs(6));
    assert!(consumer.extra.is_empty());

    let reader = KafkaSection::default().reader(&READER).unwrap();
    assert_eq!(reader.bootstrap_servers(), "127.0.0.1:9092");
    assert_eq!(reader.group_id, "candor-dashboards");
    assert!(reader.extra.is_empty());

    // Another program's defaults are its own: nothing comes from the section.
    let other = GroupConsumerDefaults {
        brokers: "k:1",
        group_id: "g",
        session_timeout: "10s",
    };
    let consumer = KafkaSection::default().group_consumer(&other).unwrap();
    assert_eq!(
        (
            consumer.bootstrap_servers().as_str(),
            consumer.group_id.as_str()
        ),
        ("k:1", "g")
    );
}

#[test]
fn a_written_key_wins_over_the_default() {
    let producer = section(
        "brokers = \"a:1, [::1]:2\"\ncreate_topics = false\npartitions = 6\n\
         delivery_timeout = \"1s\"\ncompression = \"lz4\"\n",
    )
    .producer(&PRODUCER)
    .unwrap();
    assert_eq!(producer.bootstrap_servers(), "a:1,[::1]:2");
    assert!(!producer.create_topics);
    assert_eq!(producer.partitions.get(), 6);
    assert_eq!(producer.delivery_timeout, std::time::Duration::from_secs(1));
    assert_eq!(
        (producer.compression, producer.compression_level),
        (Compression::Lz4, None)
    );
    let reader = section("group_id = \"mine\"\n").reader(&READER).unwrap();
    assert_eq!(reader.group_id, "mine");
}

#[test]
fn a_key_of_another_role_is_refused_with_why() {
    fn refused(text: &str, validate: &dyn Fn(KafkaSection) -> Result<(), SectionError>) -> String {
        validate(section(text)).unwrap_err().to_string()
    }
    let producer = |s: KafkaSection| s.producer(&PRODUCER).map(|_| ());
    let consumer = |s: KafkaSection| s.group_consumer(&GROUP_CONSUMER).map(|_| ());
    let reader = |s: KafkaSection| s.reader(&READER).map(|_| ());

    assert_eq!(
        refused("group_id = \"g\"\n", &producer),
        "invalid kafka.group_id = \"g\": the collector does not join a consumer group"
    );
    assert_eq!(
        refused("session_timeout = \"6s\"\n", &producer),
        "invalid kafka.session_timeout = \"6s\": the collector does not join a consumer group"
    );
    assert_eq!(
        refused("partitions = 3\n", &consumer),
        "invalid kafka.partitions = \"3\": the compactor does not create topics"
    );
    assert_eq!(
        refused("create_topics = false\n", &consumer),
        "invalid kafka.create_topics = \"false\": the compactor does not create topics"
    );
    assert_eq!(
        refused("compression_level = 3\n", &consumer),
        "invalid kafka.compression_level = \"3\": the compactor does not produce records"
    );
    assert_eq!(
        refused("replication_factor = 3\n", &reader),
        "invalid kafka.replication_factor = \"3\": candor-dashboards does not create topics"
    );
    assert_eq!(
        refused("queue_max_messages = 10\n", &reader),
        "invalid kafka.queue_max_messages = \"10\": candor-dashboards does not produce records"
    );
    assert_eq!(
        refused("session_timeout = \"6s\"\n", &reader),
        "invalid kafka.session_timeout = \"6s\": candor-dashboards never joins its consumer \
         group: it assigns partitions itself"
    );
    // Refused even when its value would be wrong anyway: the key is the mistake.
    assert!(refused("partitions = 0\n", &consumer).ends_with("does not create topics"));
    // Every role takes the brokers and the two tables.
    let roles: [&dyn Fn(KafkaSection) -> Result<(), SectionError>; 3] =
        [&producer, &consumer, &reader];
    for validate in roles {
        let text = "brokers = \"k:9093\"\n[extra]\n\"client.rack\" = \"a\"\n\
                    [extra_env]\n\"sasl.password\" = \"PASSWORD_VAR\"\n";
        assert_eq!(validate(section(text)), Ok(()));
    }
}

#[test]
fn a_key_no_role_takes_is_refused_when_parsed() {
    for unknown in ["group = \"g\"\n", "acks = \"all\"\n", "[extras]\n"] {
        let err = toml::from_str::<KafkaSection>(unknown).unwrap_err();
        assert!(
            err.message().starts_with("unknown field"),
            "{unknown}: {err}"
        );
    }
}

#[test]
fn the_extra_settings_keep_each_roles_rules() {
    let acks = section("[extra]\nacks = \"1\"\n")
        .producer(&PRODUCER)
        .unwrap_err();
    assert!(matches!(
        acks,
        SectionError::Settings(SettingsError::Reserved { .. })
    ));
    assert_eq!(
        acks.to_string(),
        "invalid kafka.extra.\"acks\" = \"1\": cannot be overridden: clients get an answer only \
         after an idempotent, acks=all delivery"
    );
    let commit = section("[extra_env]\n\"enable.auto.commit\" = \"COMMIT\"\n")
        .group_consumer(&GROUP_CONSUMER)
        .unwrap_err();
    assert!(
        commit.to_string().contains("offsets live in the table"),
        "{commit}"
    );
    let group = section("[extra]\n\"group.id\" = \"g\"\n")
        .reader(&READER)
        .unwrap_err();
    assert!(
        group
            .to_string()
            .ends_with(": set by kafka.group_id (--group)"),
        "{group}"
    );
    let fetch = section("[extra]\n\"fetch.wait.max.ms\" = \"1\"\n")
        .reader(&READER)
        .unwrap_err();
    assert!(fetch.to_string().contains("set by the reader"), "{fetch}");
    let secret = section("[extra]\n\"sasl.password\" = \"hunter2\"\n")
        .group_consumer(&GROUP_CONSUMER)
        .unwrap_err()
        .to_string();
    assert!(
        secret.contains("(not shown)") && !secret.contains("hunter2"),
        "{secret}"
    );
}

#[test]
fn values_are_refused_naming_the_key_and_the_value() {
    let producer = |text: &str| section(text).producer(&PRODUCER).unwrap_err().to_string();
    for (text, want) in [
        (
            "brokers = \"a\"\n",
            "invalid kafka.brokers = \"a\": expected host:port",
        ),
        (
            "partitions = 0\n",
            "invalid kafka.partitions = \"0\": must be between 1 and 2147483647",
        ),
        (
            "compression = \"brotli\"\n",
            "invalid kafka.compression = \"brotli\": expected none, snappy, lz4 or zstd",
        ),
        (
            "compression = \"snappy\"\ncompression_level = 1\n",
            "invalid kafka.compression_level = \"1\": snappy has no levels: leave it unset",
        ),
        (
            "compression_level = 13\n",
            "invalid kafka.compression_level = \"13\": must be 1..=12 for zstd",
        ),
        (
            "delivery_timeout = \"30d\"\n",
            "invalid kafka.delivery_timeout = \"30d\": must be at most 2147483647ms",
        ),
    ] {
        assert_eq!(producer(text), want, "{text}");
    }
    assert!(producer("compression = \"gzip\"\n").contains("zlib"));
    assert!(
        producer("delivery_timeout = \"0s\"\n")
            .starts_with("invalid kafka.delivery_timeout = \"0s\": ")
    );
    let blank = section("group_id = \" \"\n")
        .group_consumer(&GROUP_CONSUMER)
        .unwrap_err();
    assert_eq!(
        blank,
        SectionError::Invalid(InvalidValue::new(
            "kafka.group_id",
            " ",
            "must not be blank"
        ))
    );
    let blank = section("group_id = \"\"\n").reader(&READER).unwrap_err();
    assert_eq!(
        blank.to_string(),
        "invalid kafka.group_id = \"\": must not be blank"
    );
    let session = section("session_timeout = \"6\"\n")
        .group_consumer(&GROUP_CONSUMER)
        .unwrap_err()
        .to_string();
    assert!(
        session.starts_with("invalid kafka.session_timeout = \"6\": "),
        "{session}"
    );
}

#[test]
fn brokers_are_host_and_port_pairs() {
    let brokers = parse_brokers("kafka.brokers", "a:1, [::1]:2").unwrap();
    assert_eq!(
        brokers[1],
        BrokerAddr {
            host: "[::1]".into(),
            port: 2
        }
    );
    assert_eq!(bootstrap_servers(&brokers), "a:1,[::1]:2");
    for bad in [
        "a", "", " ", "a:1,", "a:0", "a:65536", "::1:2", "a b:1", ":1",
    ] {
        let err = parse_brokers("kafka.brokers", bad).unwrap_err();
        assert_eq!(err.key, "kafka.brokers", "{bad}");
        assert!(
            err.to_string().starts_with("invalid kafka.brokers = "),
            "{err}"
        );
    }
}
