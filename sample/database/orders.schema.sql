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
