module holt-k8s/tools/promlint

go 1.24

require github.com/prometheus/client_golang v1.23.0

require (
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.65.0 // indirect
	google.golang.org/protobuf v1.36.6 // indirect
)
