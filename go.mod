module github.com/ttfx/ttfx

go 1.26.8

require (
	github.com/dlclark/regexp2/v2 v2.5.1 // indirect
	github.com/tiktoken-go/tokenizer v0.10.0 // indirect
	go.yaml.in/yaml/v3 v3.0.4 // indirect
)
