module example.com/relay-quickstart

go 1.22

require github.com/standard-webhooks/standard-webhooks/libraries v0.0.1
