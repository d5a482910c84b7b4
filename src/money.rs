//! Money as the price table, the cost computation, budgets and their refusals write it (a leaf
//! module: every layer may use it): an [`Amount`] is a whole number of
//! billionths of a currency's unit (nano-units) in a `u64`, and a [`Currency`] its ISO 4217 code.
//!
//! Why integers rather than floats or a decimal crate: every price a provider publishes is a
//! decimal with at most a few places (`$0.000015`, `¥0.0008`), and nano-units hold any of them
//! exactly; sums are exact; `u64` holds 18 billion units of a currency, more than any request or
//! budget; and a whole number is what a shared counter (Redis `INCRBY`) adds, which budgets need.
//! A cost is computed as `quantity × price ÷ per` in `u128` and rounded once, half up, to a
//! nano-unit, so no rounding is ever larger than half a billionth of the currency.

use std::collections::BTreeMap;
use std::fmt;

/// Nano-units in one unit of a currency.
pub(crate) const NANOS: u64 = 1_000_000_000;

/// An amount of money: billionths of a currency's unit. Never negative.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Amount(u64);

impl Amount {
    /// Nothing.
    pub(crate) const ZERO: Amount = Amount(0);

    /// `nanos` billionths of a unit (what a shared budget counter holds).
    // Read by budgets and the usage ledger (issue 28), which the request path does not have yet.
    #[allow(dead_code)]
    pub(crate) const fn from_nanos(nanos: u64) -> Amount {
        Amount(nanos)
    }

    /// In billionths of a unit.
    pub(crate) const fn nanos(self) -> u64 {
        self.0
    }

    /// A decimal as written (`15`, `0.000015`, `2.50`): digits, at most one point, at most nine
    /// places after it. `None` for anything else (a sign, an exponent, a tenth place, too large).
    pub(crate) fn parse(text: &str) -> Option<Amount> {
        let (whole, frac) = match text.split_once('.') {
            Some((w, f)) => (w, f),
            None => (text, ""),
        };
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() || !digits(whole) || !digits(frac) || frac.len() > 9 {
            return None;
        }
        let whole: u64 = whole.parse().ok()?;
        let mut frac_nanos: u64 = 0;
        for (i, b) in frac.bytes().enumerate() {
            frac_nanos += u64::from(b - b'0') * 10u64.pow(8 - i as u32);
        }
        whole
            .checked_mul(NANOS)?
            .checked_add(frac_nanos)
            .map(Amount)
    }

    /// `self + other`, saturating (18 billion units is past any real figure).
    pub(crate) fn plus(self, other: Amount) -> Amount {
        Amount(self.0.saturating_add(other.0))
    }

    /// `quantity` units at `self` per `per` units: `quantity × self ÷ per`, rounded half up to a
    /// nano-unit (the one rounding a cost goes through), saturating.
    pub(crate) fn times(self, quantity: u64, per: u64) -> Amount {
        let per = u128::from(per.max(1));
        let exact = u128::from(quantity) * u128::from(self.0);
        let rounded = (exact + per / 2) / per;
        Amount(u64::try_from(rounded).unwrap_or(u64::MAX))
    }
}

impl fmt::Display for Amount {
    /// The decimal, without trailing zeros (`15`, `0.000015`, `0.0425`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, frac) = (self.0 / NANOS, self.0 % NANOS);
        if frac == 0 {
            return write!(f, "{whole}");
        }
        // Trailing zeros dropped by dividing them off, not by trimming a formatted copy: an
        // amount is written in every priced answer and access line.
        let (mut digits, mut width) = (frac, 9);
        while digits % 10 == 0 {
            digits /= 10;
            width -= 1;
        }
        write!(f, "{whole}.{digits:0width$}")
    }
}

impl serde::Serialize for Amount {
    /// As a decimal string: exact, where a JSON number read as a float would not be.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A currency: its ISO 4217 code (three capital letters: `USD`, `CNY`, `EUR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Currency([u8; 3]);

impl Currency {
    /// `code` if it has the shape of an ISO 4217 code (three ASCII capital letters).
    pub(crate) fn parse(code: &str) -> Option<Currency> {
        let b = code.as_bytes();
        (b.len() == 3 && b.iter().all(u8::is_ascii_uppercase)).then(|| Currency([b[0], b[1], b[2]]))
    }

    /// The code.
    pub(crate) fn as_str(&self) -> &str {
        // Three ASCII capitals, checked by `parse`.
        std::str::from_utf8(&self.0).unwrap_or("???")
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Currency {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// `currency_rates:` as the operator states them: what one unit of a currency is worth in
/// another (`CNY: {USD: "0.14"}`: 1 CNY is 0.14 USD), exact to nine places. Only the direction
/// stated is used: a rate is never inverted, since `1 / 7.1` has no exact decimal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Rates {
    rates: BTreeMap<(Currency, Currency), Amount>,
}

impl Rates {
    /// Read `currency_rates` (`from → to → rate`); problems are pushed with their path.
    pub(crate) fn read(
        written: &BTreeMap<String, BTreeMap<String, serde_yaml::Value>>,
        errors: &mut Vec<String>,
    ) -> Rates {
        let mut rates = BTreeMap::new();
        for (from, to_rates) in written {
            let Some(f) = Currency::parse(from) else {
                errors.push(format!(
                    "switchyard.currency_rates.{from}: not a currency: write its ISO 4217 code (USD, CNY)"
                ));
                continue;
            };
            for (to, rate) in to_rates {
                let at = format!("switchyard.currency_rates.{from}.{to}");
                let Some(t) = Currency::parse(to) else {
                    errors.push(format!(
                        "{at}: `{to}` is not a currency: write its ISO 4217 code (USD, CNY)"
                    ));
                    continue;
                };
                let amount = match rate {
                    serde_yaml::Value::String(s) => Amount::parse(s),
                    serde_yaml::Value::Number(n) if n.is_u64() => Amount::parse(&n.to_string()),
                    _ => None,
                };
                match amount {
                    Some(a) if a > Amount::ZERO && f != t => {
                        rates.insert((f, t), a);
                    }
                    Some(_) if f == t => {
                        errors.push(format!("{at}: a currency converts to itself at 1"))
                    }
                    _ => errors.push(format!(
                        "{at}: write the rate as a quoted decimal greater than 0 with at most \
                         nine places (\"0.14\")"
                    )),
                }
            }
        }
        Rates { rates }
    }

    /// Whether an amount in `from` can be converted into `to` (the same currency, or a rate
    /// stated).
    pub(crate) fn converts(&self, from: Currency, to: Currency) -> bool {
        from == to || self.rates.contains_key(&(from, to))
    }

    /// `amount` of `from` in `to`: `amount × rate`, rounded half up to a nano-unit. `None` when
    /// no rate is stated.
    pub(crate) fn convert(&self, amount: Amount, from: Currency, to: Currency) -> Option<Amount> {
        if from == to {
            return Some(amount);
        }
        let rate = self.rates.get(&(from, to))?;
        Some(amount.times(rate.nanos(), NANOS))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_parse_exactly_and_print_back() {
        for (text, nanos, shown) in [
            ("15", 15 * NANOS, "15"),
            ("15.00", 15 * NANOS, "15"),
            ("0.000015", 15_000, "0.000015"),
            ("2.5", 2_500_000_000, "2.5"),
            ("0.000000001", 1, "0.000000001"),
            ("0", 0, "0"),
            ("1.10", 1_100_000_000, "1.1"),
            ("12.000100", 12 * NANOS + 100_000, "12.0001"),
            ("0.123456789", 123_456_789, "0.123456789"),
        ] {
            let a = Amount::parse(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(a.nanos(), nanos, "{text}");
            assert_eq!(a.to_string(), shown, "{text}");
        }
        for bad in [
            "",
            ".5",
            "-1",
            "1e-5",
            "0.0000000001",
            "1.2.3",
            " 1",
            "1,5",
            "99999999999",
        ] {
            assert_eq!(Amount::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_quantity_is_priced_with_one_rounding_half_up() {
        // $0.02 per 1M tokens, 1,234 tokens: 0.00002468 → 24,680 nano-dollars, exact.
        let rate = Amount::parse("0.02").unwrap();
        assert_eq!(rate.times(1_234, 1_000_000).nanos(), 24_680);
        assert_eq!(rate.times(1, 1_000_000).nanos(), 20);
        // $0.000001 per 1M: 499 units are 0.499 nano-dollars (rounds down), 500 are 0.5 (up).
        let tiny = Amount::parse("0.000001").unwrap();
        assert_eq!(tiny.times(499, 1_000_000).nanos(), 0);
        assert_eq!(tiny.times(500, 1_000_000).nanos(), 1);
        assert_eq!(
            Amount::from_nanos(u64::MAX).times(u64::MAX, 1).nanos(),
            u64::MAX
        );
    }

    fn written(yaml: &str) -> BTreeMap<String, BTreeMap<String, serde_yaml::Value>> {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn rates_convert_exactly_in_the_direction_stated() {
        let mut errors = Vec::new();
        let rates = Rates::read(&written("CNY: {USD: \"0.14\"}\nEUR: {USD: 1}"), &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        let (cny, usd, eur) = (
            Currency::parse("CNY").unwrap(),
            Currency::parse("USD").unwrap(),
            Currency::parse("EUR").unwrap(),
        );
        // ¥0.25 at 0.14: $0.035, exact.
        let quarter = Amount::parse("0.25").unwrap();
        assert_eq!(rates.convert(quarter, cny, usd), Amount::parse("0.035"));
        // One nano-yuan is 0.14 nano-dollars: rounds to 0; four are 0.56: rounds up to 1.
        assert_eq!(
            rates
                .convert(Amount::from_nanos(1), cny, usd)
                .unwrap()
                .nanos(),
            0
        );
        assert_eq!(
            rates
                .convert(Amount::from_nanos(4), cny, usd)
                .unwrap()
                .nanos(),
            1
        );
        assert_eq!(rates.convert(quarter, eur, usd), Some(quarter));
        assert_eq!(rates.convert(quarter, usd, usd), Some(quarter));
        // Never inverted.
        assert_eq!(rates.convert(quarter, usd, cny), None);
        assert!(rates.converts(cny, usd) && !rates.converts(usd, cny) && rates.converts(cny, cny));
    }

    #[test]
    fn bad_rates_are_named_by_path() {
        let mut errors = Vec::new();
        Rates::read(
            &written("cny: {USD: \"0.14\"}\nCNY: {USD: 0.14, EUR: \"0\", CNY: \"1\", usd: \"1\"}"),
            &mut errors,
        );
        assert_eq!(
            errors,
            [
                "switchyard.currency_rates.CNY.CNY: a currency converts to itself at 1",
                "switchyard.currency_rates.CNY.EUR: write the rate as a quoted decimal greater than 0 with at \
                 most nine places (\"0.14\")",
                "switchyard.currency_rates.CNY.USD: write the rate as a quoted decimal greater than 0 with at \
                 most nine places (\"0.14\")",
                "switchyard.currency_rates.CNY.usd: `usd` is not a currency: write its ISO 4217 code (USD, \
                 CNY)",
                "switchyard.currency_rates.cny: not a currency: write its ISO 4217 code (USD, CNY)",
            ]
        );
    }

    #[test]
    fn currencies_are_iso_codes() {
        assert_eq!(Currency::parse("CNY").unwrap().to_string(), "CNY");
        for bad in ["usd", "US", "USDT", "U5D", ""] {
            assert!(Currency::parse(bad).is_none(), "{bad}");
        }
    }
}
