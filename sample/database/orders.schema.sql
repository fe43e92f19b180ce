-- The sample's orders, one row per unit sold (applied at start by OrdersDatabase; idempotent).
-- Written by the `orders` queue worker with INSERT … ON CONFLICT DO NOTHING: a task delivered
-- twice, or a worker whose lease ran out, writes no second row. `fence` is the fencing token of
-- the task's lease that wrote the row (it rises with every lease of the queue's tasks).
CREATE TABLE IF NOT EXISTS orders (
  order_id   text PRIMARY KEY,
  sku        text NOT NULL,
  user_id    text NOT NULL,
  price      numeric(14, 2) NOT NULL,
  fence      bigint NOT NULL,
  bought_at  timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  UNIQUE (sku, user_id)
)
;

-- How each unit taken from a sale's stock ended, one row per order id, written once: 'ordered'
-- (with its `orders` row, in the same statement) or 'released' (the unit went back on sale: its
-- buyer was never confirmed and no order was on its way). The primary key decides a race
-- between the worker writing an order and the sweeper releasing its unit: the first insert
-- wins, the other writes nothing, so a unit is never both ordered and back in stock.
CREATE TABLE IF NOT EXISTS order_outcomes (
  order_id   text PRIMARY KEY,
  outcome    text NOT NULL CHECK (outcome IN ('ordered', 'released')),
  settled_at timestamptz NOT NULL DEFAULT clock_timestamp()
)
