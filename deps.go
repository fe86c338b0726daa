//go:build tools

package main

import (
	_ "github.com/cloudsoda/go-smb2"
	_ "github.com/microsoft/go-mssqldb"
	_ "github.com/temporalio/ui-server/v2/server"
	_ "go.temporal.io/api/workflowservice/v1"
	_ "go.temporal.io/sdk/client"
	_ "go.temporal.io/server/temporal"
	_ "go.uber.org/zap"
	_ "gopkg.in/yaml.v3"
)
