# Sourced by demo.sh and test.sh: installs nodejs and npm if missing, then the user CLI's locked
# dependencies (scripts/client, @polkadot/api).
install_client() {
    if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
        echo "installing nodejs and npm (the polkadot.js user CLI)"
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo=sudo
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm
    fi
    (cd "$(dirname "${BASH_SOURCE[0]}")/../client" && npm ci --no-audit --no-fund --loglevel=error)
}
