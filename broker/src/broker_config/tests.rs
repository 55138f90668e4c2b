use super::*;

// A topic config reads its broker synonyms through the layers: the node layer beats the
// cluster default, which beats the static value; hours are turned into milliseconds.
#[test]
fn layers_and_synonyms() {
    let d = BrokerDefaults::new(1_048_588, 1 << 30, 168 * HOUR_MS);
    assert_eq!(d.get("retention.ms").as_deref(), Some("604800000"));
    assert!(d.topic_config_synonyms("retention.ms").is_empty());
    assert_eq!(
        d.topic_config_synonyms("segment.bytes"),
        vec![Synonym {
            name: "log.segment.bytes".into(),
            value: "1073741824".into(),
            source: ConfigSource::Default,
        }]
    );
    let mut dynamic = DynamicBrokerConfigs::default();
    dynamic
        .cluster_default
        .insert("log.retention.hours".into(), "2".into());
    d.set_dynamic(dynamic.clone());
    assert_eq!(d.get("retention.ms").as_deref(), Some("7200000"));
    dynamic
        .cluster_default
        .insert("log.retention.ms".into(), "5000".into());
    dynamic
        .node
        .insert("log.retention.ms".into(), "6000".into());
    d.set_dynamic(dynamic);
    assert_eq!(d.get("retention.ms").as_deref(), Some("6000"));
    let names: Vec<(String, ConfigSource)> = d
        .topic_config_synonyms("retention.ms")
        .into_iter()
        .map(|s| (s.name, s.source))
        .collect();
    assert_eq!(
        names,
        vec![
            ("log.retention.ms".into(), ConfigSource::DynamicBroker),
            (
                "log.retention.ms".into(),
                ConfigSource::DynamicDefaultBroker
            ),
            (
                "log.retention.hours".into(),
                ConfigSource::DynamicDefaultBroker
            ),
            ("log.retention.hours".into(), ConfigSource::Default),
        ]
    );
}

// Only dynamic broker configs with valid values may be set.
#[test]
fn validates_broker_layers() {
    let layer = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
    assert_eq!(
        validate_broker_layer(&layer("log.retention.ms", "100")),
        Ok(())
    );
    assert_eq!(
        validate_broker_layer(&layer("num.partitions", "3")),
        Err(ConfigError::NotDynamic("num.partitions".into()))
    );
    assert!(matches!(
        validate_broker_layer(&layer("log.segment.bytes", "1")),
        Err(ConfigError::Invalid { .. })
    ));
}
