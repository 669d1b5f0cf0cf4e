# shellcheck shell=bash
# Sourced by the Swift client tests: the pinned python-swiftclient,
# python-keystoneclient, swift-bench and boto3 in a venv under ~/.cache
# (installed when missing). Sets swift (the CLI) and py (the venv's
# python). A client that cannot be installed fails the test.

# Pinned client versions; the venv's name holds them, so a change of pins
# makes a new venv rather than reusing an old one.
swiftclient_version=4.11.0 keystoneclient_version=6.0.0 swiftbench_version=2.0.0
boto3_version=1.44.8 botocore_version=1.44.8
venv=${QUILT_SWIFT_VENV:-$HOME/.cache/quilt-test/swift-clients-swiftclient$swiftclient_version-keystoneclient$keystoneclient_version-swiftbench$swiftbench_version}
if ! [ -x "$venv/bin/swift" ] || ! [ -x "$venv/bin/swift-bench" ] || ! "$venv/bin/python" -c 'import boto3, keystoneclient' 2>/dev/null; then
	printf '\n== %s\n' "installing python-swiftclient $swiftclient_version, python-keystoneclient $keystoneclient_version, swift-bench $swiftbench_version, boto3 $boto3_version in $venv"
	python3 -m venv "$venv"
	"$venv/bin/pip" install -q "python-swiftclient==$swiftclient_version" "python-keystoneclient==$keystoneclient_version" \
		"swift-bench==$swiftbench_version" "boto3==$boto3_version" "botocore==$botocore_version"
fi
swift="$venv/bin/swift"
py="$venv/bin/python"
