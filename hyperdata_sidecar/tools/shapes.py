"""What the node's events look like, per table, as pools of pre-rendered byte templates.

Field sets, value sets and rates follow the verified field contract ("Ingestion schemas" in the
ingestion-layer reference). A pool holds a few thousand events rendered once from a seeded RNG;
the generator then only fills in the per-event slots (block time, order id, trade id), which is
what makes a few GB of fixtures cheap. Each template keeps its slots as ``%d`` / ``%s``
placeholders, so ``render`` is a single bytes ``%`` operation.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

BOOK_DIFFS = "node_raw_book_diffs_streaming"
ORDER_STATUSES = "node_order_statuses_streaming"
FILLS = "node_fills_streaming"

POOL_SIZE = 4096

# (coin, reference price, weight). Namespaced coins (builder-deployed perps such as "xyz:TSLA")
# carry ~40% of the weight, as they carry ~40% of the measured traffic; "@107" is a spot pair.
COINS: tuple[tuple[str, float, float], ...] = (
    ("BTC", 104_500.0, 12.0),
    ("ETH", 2_650.0, 9.0),
    ("HYPE", 38.5, 9.0),
    ("SOL", 152.0, 6.0),
    ("LIT", 1.5047, 3.0),
    ("DOGE", 0.1874, 3.0),
    ("XRP", 2.21, 3.0),
    ("kPEPE", 0.01195, 2.0),
    ("FARTCOIN", 1.083, 2.0),
    ("SUI", 3.12, 2.0),
    ("ENA", 0.3121, 2.0),
    ("TRUMP", 10.64, 1.5),
    ("@107", 38.47, 2.5),
    ("@142", 104_480.0, 2.0),
    ("xyz:XYZ100", 21_540.0, 8.0),
    ("xyz:TSLA", 318.4, 7.0),
    ("xyz:NVDA", 142.1, 6.0),
    ("xyz:AAPL", 203.9, 5.0),
    ("xyz:GOLD", 3_342.0, 4.0),
    ("xyz:SILVER", 36.2, 2.0),
    ("cash:USA500", 6_020.0, 3.0),
    ("cash:HOOD", 78.3, 2.0),
    ("flx:OIL", 64.8, 1.5),
    ("vntl:SPACEX", 212.0, 1.5),
)

_DIFF_KINDS = (("new", 49_690), ("remove", 49_518), ("update", 792))
_STATUSES = (
    ("open", 380),
    ("canceled", 300),
    ("filled", 160),
    ("badAloPxRejected", 70),
    ("iocCancelRejected", 40),
    ("perpMarginRejected", 15),
    ("triggered", 10),
    ("reduceOnlyRejected", 10),
    ("marginCanceled", 5),
    ("minTradeNtlRejected", 5),
    ("tickRejected", 5),
)
_LIMIT_TIFS = (("Alo", 55), ("Gtc", 25), ("Ioc", 15), ("FrontendMarket", 4), ("LiquidationMarket", 1))
_FILL_DIRS = (
    ("Open Long", 22),
    ("Open Short", 20),
    ("Close Long", 18),
    ("Close Short", 17),
    ("Buy", 9),
    ("Sell", 9),
    ("Long > Short", 2),
    ("Short > Long", 2),
    ("Auto-Deleveraging", 1),
)
_FEE_TOKENS = (
    ("USDC", 900),
    ("USDT0", 30),
    ("USDH", 20),
    ("USDE", 15),
    ("HYPE", 10),
    ("UBTC", 5),
    ("UETH", 5),
    ("USOL", 5),
    ("FEUSD", 4),
    ("USDHL", 3),
    ("KHYPE", 3),
)
# Fraction of events carrying each optional fill key (1 - measured null rate).
_FILL_OPTIONAL_RATES = {
    "cloid": 0.721,
    "deployerFee": 0.51,
    "builder": 0.074,
    "builderFee": 0.046,
    "twapId": 0.057,
    "priorityGas": 0.02,
}
# Rare shapes are forced into a fixed number of pool slots so that every corpus of a few
# thousand lines exercises them ("occasionally"), rather than left to a 3-in-200k chance.
_RARE_SLOTS = 2


@dataclass(frozen=True)
class EventPool:
    """Pre-rendered event templates of one table and how to fill their slots.

    ``render(template, block_time, block_ms, oid, tid)`` returns the event's JSON bytes;
    ``block_time`` is the ISO block time (bytes), ``block_ms`` the same instant in epoch ms.
    """

    table: str
    templates: Sequence[bytes]
    render: Callable[[bytes, bytes, int, int, int], bytes]


def build_pool(table: str, rng: random.Random, size: int = POOL_SIZE) -> EventPool:
    """A pool of ``size`` event templates for ``table``, drawn from ``rng``."""
    values = _Values(rng)
    if table == BOOK_DIFFS:
        return EventPool(table, [values.book_diff() for _ in range(size)], _render_book_diff)
    if table == ORDER_STATUSES:
        templates = [values.order_status(children=i < _RARE_SLOTS) for i in range(size)]
        rng.shuffle(templates)
        return EventPool(table, templates, _render_order_status)
    if table == FILLS:
        templates = [values.fill(liquidation=i < _RARE_SLOTS) for i in range(size)]
        rng.shuffle(templates)
        return EventPool(table, templates, _render_fill)
    raise ValueError(f"unknown table {table!r}")


def _render_book_diff(template: bytes, block_time: bytes, block_ms: int, oid: int, tid: int) -> bytes:
    return template % oid


def _render_order_status(template: bytes, block_time: bytes, block_ms: int, oid: int, tid: int) -> bytes:
    return template % (block_time, oid, block_ms)


def _render_fill(template: bytes, block_time: bytes, block_ms: int, oid: int, tid: int) -> bytes:
    return template % (block_ms, oid, tid)


class _Values:
    """Random field values, drawn from one seeded RNG."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.users = [self.hex(40) for _ in range(512)]
        self.coins = [c for c, _, _ in COINS]
        self.prices = {c: p for c, p, _ in COINS}
        self.coin_weights = [w for _, _, w in COINS]

    # ---- primitive values -------------------------------------------------

    def hex(self, digits: int) -> str:
        return "0x%0*x" % (digits, self.rng.getrandbits(digits * 4))

    def pick(self, weighted: Sequence[tuple[str, int]]) -> str:
        return self.rng.choices([v for v, _ in weighted], [w for _, w in weighted])[0]

    def coin(self) -> str:
        return self.rng.choices(self.coins, self.coin_weights)[0]

    def px(self, coin: str) -> str:
        return _decimal(self.prices[coin] * (1 + self.rng.uniform(-0.02, 0.02)), significant=5)

    def sz(self) -> str:
        return _decimal(self.rng.lognormvariate(1.0, 2.0), significant=4)

    def chance(self, rate: float) -> bool:
        return self.rng.random() < rate

    # ---- events -----------------------------------------------------------

    def book_diff(self) -> bytes:
        coin = self.coin()
        kind = self.pick(_DIFF_KINDS)
        if kind == "remove":
            diff = '"remove"'
        elif kind == "new":
            diff = '{"new":{"sz":"%s"}}' % self.sz()
        else:
            diff = '{"update":{"origSz":"%s","newSz":"%s"}}' % (self.sz(), self.sz())
        text = '{"user":"%s","oid":%%d,"coin":"%s","side":"%s","px":"%s","raw_book_diff":%s}' % (
            self.rng.choice(self.users),
            coin,
            self.rng.choice("AB"),
            self.px(coin),
            diff,
        )
        return text.encode()

    def order_status(self, *, children: bool) -> bytes:
        status = self.pick(_STATUSES)
        hash_ = '"%s"' % self.hex(64) if self.chance(0.334) else "null"
        builder = '{"b":"%s","f":%d}' % (self.hex(40), self.rng.choice((10, 25, 50))) if self.chance(0.007) else "null"
        order = self.order(slots=True, depth=2 if children else 0)
        text = '{"time":"%%s","user":"%s","status":"%s","hash":%s,"builder":%s,"order":%s}' % (
            self.rng.choice(self.users),
            status,
            hash_,
            builder,
            order,
        )
        return text.encode()

    def order(self, *, slots: bool, depth: int) -> str:
        """One order object; ``slots`` leaves ``oid`` and ``timestamp`` as placeholders; ``depth``
        nests that many levels of child orders (trigger / TP-SL children)."""
        coin = self.coin()
        sz = self.sz()
        trigger = depth > 0 or self.chance(0.015)
        if trigger:
            order_type = self.rng.choice(("Stop Market", "Take Profit Market", "Stop Limit"))
            trigger_px = self.px(coin)
            condition = "Price %s %s" % (self.rng.choice(("above", "below")), trigger_px)
        else:
            order_type, trigger_px, condition = "Limit", "0.0", "N/A"
        # tif is null exactly for the market trigger orders.
        tif = "null" if order_type.endswith("Market") else '"%s"' % self.pick(_LIMIT_TIFS)
        cloid = '"%s"' % self.hex(32) if self.chance(0.886) else "null"
        children = ",".join(self.order(slots=False, depth=depth - 1) for _ in range(depth and 2))
        oid = "%d" if slots else str(self.rng.randrange(10**11, 10**12))
        timestamp = "%d" if slots else str(1_749_560_175_035 + self.rng.randrange(10**6))
        return (
            '{"coin":"%s","side":"%s","limitPx":"%s","sz":"%s","oid":%s,"timestamp":%s,'
            '"triggerCondition":"%s","isTrigger":%s,"triggerPx":"%s","children":[%s],'
            '"isPositionTpsl":%s,"reduceOnly":%s,"orderType":"%s","origSz":"%s","tif":%s,"cloid":%s}'
        ) % (
            coin,
            self.rng.choice("AB"),
            self.px(coin),
            sz,
            oid,
            timestamp,
            condition,
            _bool(trigger),
            trigger_px,
            children,
            _bool(trigger and self.chance(0.5)),
            _bool(self.chance(0.1)),
            order_type,
            sz if self.chance(0.8) else self.sz(),
            tif,
            cloid,
        )

    def fill(self, *, liquidation: bool) -> bytes:
        coin = self.coin()
        fields = [
            '"coin":"%s"' % coin,
            '"px":"%s"' % self.px(coin),
            '"sz":"%s"' % self.sz(),
            '"side":"%s"' % self.rng.choice("AB"),
            '"time":%d',
            '"startPosition":"%s"' % _decimal(self.rng.uniform(-5000, 5000), significant=6),
            '"dir":"%s"' % self.pick(_FILL_DIRS),
            '"closedPnl":"%s"' % (_decimal(self.rng.uniform(-50, 50), significant=6) if self.chance(0.4) else "0.0"),
            '"hash":"%s"' % self.hex(64),
            '"oid":%d',
            '"crossed":%s' % _bool(self.chance(0.6)),
            '"fee":"%s"' % _decimal(self.rng.uniform(-0.01, 2.0), significant=5),
            '"tid":%d',
        ]
        optional = {key: self.chance(rate) for key, rate in _FILL_OPTIONAL_RATES.items()}
        if optional["cloid"]:
            fields.append('"cloid":"%s"' % self.hex(32))
        fields.append('"feeToken":"%s"' % self.pick(_FEE_TOKENS))
        if optional["deployerFee"]:
            fields.append('"deployerFee":"%s"' % _decimal(self.rng.uniform(0, 0.05), significant=4))
        if optional["builder"]:
            fields.append('"builder":"%s"' % self.hex(40))
        if optional["builderFee"]:
            fields.append('"builderFee":"%s"' % _decimal(self.rng.uniform(0, 0.2), significant=4))
        if optional["twapId"]:
            fields.append('"twapId":%d' % self.rng.randrange(100_000, 2_000_000))
        if optional["priorityGas"]:
            fields.append('"priorityGas":"%s"' % _decimal(self.rng.uniform(0, 0.01), significant=3))
        if liquidation:
            fields.append(
                '"liquidation":{"liquidatedUser":"%s","markPx":"%s","method":"market"}'
                % (self.rng.choice(self.users), self.px(coin))
            )
        return ('["%s",{%s}]' % (self.rng.choice(self.users), ",".join(fields))).encode()


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _decimal(value: float, *, significant: int) -> str:
    """``value`` as the node writes decimals: plain notation, at least one fractional digit."""
    magnitude = len(str(int(abs(value)))) if abs(value) >= 1 else 0
    text = "%.*f" % (max(1, significant - magnitude), value)
    text = text.rstrip("0")
    return text + "0" if text.endswith(".") else text
