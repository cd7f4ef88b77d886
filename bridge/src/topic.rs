//! VDA 5050 MQTT topics: `interfaceName/majorVersion/manufacturer/serialNumber/topic`.
//!
//! Design constraints:
//! - A bridge serves one interface prefix (`interfaceName/majorVersion`, e.g.
//!   `uagv/v2`); a topic outside it, with another number of levels, empty levels or
//!   a topic name the protocol does not define is refused, never guessed at.
//! - Which side authors a topic is fixed by the protocol ([`Kind::author`]): the
//!   vehicle publishes `state`, `connection`, `factsheet`, `visualization`; master
//!   control publishes `order`, `instantActions` (and in 3.0 `responses`, `zoneSet`).

/// A VDA 5050 topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `order` (master control → vehicle).
    Order,
    /// `instantActions` (master control → vehicle).
    InstantActions,
    /// `state` (vehicle → master control).
    State,
    /// `connection` (vehicle → master control; the broker's last will).
    Connection,
    /// `factsheet` (vehicle → master control).
    Factsheet,
    /// `visualization` (vehicle → visualisation clients).
    Visualization,
    /// `responses` (3.0: master control → vehicle, answers to zone/edge requests).
    Responses,
    /// `zoneSet` (3.0: master control → vehicle).
    ZoneSet,
}

/// Who authors a topic's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The vehicle (its controller).
    Vehicle,
    /// Master control (the fleet manager).
    MasterControl,
}

impl Kind {
    /// Every topic, in a fixed order.
    pub const ALL: [Kind; 8] = [
        Kind::Order,
        Kind::InstantActions,
        Kind::State,
        Kind::Connection,
        Kind::Factsheet,
        Kind::Visualization,
        Kind::Responses,
        Kind::ZoneSet,
    ];

    /// The topic name as VDA 5050 spells it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Order => "order",
            Kind::InstantActions => "instantActions",
            Kind::State => "state",
            Kind::Connection => "connection",
            Kind::Factsheet => "factsheet",
            Kind::Visualization => "visualization",
            Kind::Responses => "responses",
            Kind::ZoneSet => "zoneSet",
        }
    }

    /// The topic named `name`.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Who publishes it.
    pub fn author(self) -> Side {
        match self {
            Kind::State | Kind::Connection | Kind::Factsheet | Kind::Visualization => Side::Vehicle,
            Kind::Order | Kind::InstantActions | Kind::Responses | Kind::ZoneSet => {
                Side::MasterControl
            }
        }
    }
}

/// The interface prefix a bridge serves: `interfaceName/majorVersion`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// `interfaceName` (e.g. `uagv`).
    pub name: String,
    /// `majorVersion` (e.g. `v2`).
    pub major: String,
}

impl Interface {
    /// Parses `name/major` (two non-empty levels without MQTT wildcards).
    pub fn parse(prefix: &str) -> Result<Interface, String> {
        let levels: Vec<&str> = prefix.split('/').collect();
        let [name, major] = levels[..] else {
            return Err(format!(
                "interface prefix {prefix:?} is not interfaceName/majorVersion"
            ));
        };
        for l in [name, major] {
            if l.is_empty() || l.contains(['+', '#']) {
                return Err(format!(
                    "interface prefix {prefix:?} has an empty or wildcard level"
                ));
            }
        }
        Ok(Interface {
            name: name.to_string(),
            major: major.to_string(),
        })
    }

    /// The MQTT topic of `kind` for one vehicle.
    pub fn topic(&self, manufacturer: &str, serial: &str, kind: Kind) -> String {
        format!(
            "{}/{}/{manufacturer}/{serial}/{}",
            self.name,
            self.major,
            kind.name()
        )
    }

    /// The MQTT filter for `kind` of every vehicle.
    pub fn filter_all(&self, kind: Kind) -> String {
        format!("{}/{}/+/+/{}", self.name, self.major, kind.name())
    }
}

/// A parsed topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic {
    /// `manufacturer` level.
    pub manufacturer: String,
    /// `serialNumber` level.
    pub serial: String,
    /// The topic.
    pub kind: Kind,
}

/// Parses `topic` under `interface`.
pub fn parse(interface: &Interface, topic: &str) -> Result<Topic, String> {
    let levels: Vec<&str> = topic.splitn(6, '/').collect();
    let [name, major, manufacturer, serial, kind] = levels[..] else {
        return Err(format!(
            "not interfaceName/majorVersion/manufacturer/serialNumber/topic ({} levels)",
            levels.len()
        ));
    };
    if name != interface.name || major != interface.major {
        return Err(format!(
            "outside the interface {}/{}",
            interface.name, interface.major
        ));
    }
    if manufacturer.is_empty() || serial.is_empty() {
        return Err("empty manufacturer or serialNumber level".into());
    }
    let Some(kind) = Kind::from_name(kind) else {
        return Err(format!("{kind:?} is not a VDA 5050 topic"));
    };
    Ok(Topic {
        manufacturer: manufacturer.to_string(),
        serial: serial.to_string(),
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_parse_and_strangers_are_refused() {
        let i = Interface::parse("uagv/v2").unwrap();
        assert_eq!(
            parse(&i, "uagv/v2/acme/agv-7/state").unwrap(),
            Topic {
                manufacturer: "acme".into(),
                serial: "agv-7".into(),
                kind: Kind::State
            }
        );
        assert_eq!(
            i.topic("acme", "agv-7", Kind::InstantActions),
            "uagv/v2/acme/agv-7/instantActions"
        );
        for bad in [
            "uagv/v2/acme/agv-7/status",
            "uagv/v3/acme/agv-7/state",
            "other/v2/acme/agv-7/state",
            "uagv/v2/acme/state",
            "uagv/v2/acme/agv-7/state/extra",
            "uagv/v2//agv-7/state",
            "",
        ] {
            assert!(parse(&i, bad).is_err(), "{bad}");
        }
        assert!(Interface::parse("uagv").is_err());
        assert!(Interface::parse("uagv/+").is_err());
        assert!(Interface::parse("a/b/c").is_err());
        assert_eq!(Kind::State.author(), Side::Vehicle);
        assert_eq!(Kind::Order.author(), Side::MasterControl);
        for k in Kind::ALL {
            assert_eq!(Kind::from_name(k.name()), Some(k));
        }
    }
}
