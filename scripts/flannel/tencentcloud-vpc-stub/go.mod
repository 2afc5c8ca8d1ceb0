// A stand-in for the Tencent Cloud VPC SDK that flannel's tencentvpc backend imports (see ../go.mod).
module github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc

go 1.22
