-- The source table of the Debezium example (examples/debezium) and of scripts/debezium-test: run in the
-- database "inventory" (postgres:16 runs it from /docker-entrypoint-initdb.d on a new volume).
CREATE TABLE customers (
  id    serial PRIMARY KEY,
  name  text NOT NULL,
  email text NOT NULL
);
-- Whole rows in the "before" of update and delete events (the default, the primary key, gives the key only).
ALTER TABLE customers REPLICA IDENTITY FULL;
INSERT INTO customers (name, email) VALUES
  ('Sally Thomas',  'sally.thomas@acme.com'),
  ('George Bailey', 'gbailey@foobar.com'),
  ('Edward Walker', 'ed@walker.com');
