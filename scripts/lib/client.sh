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

# Sourced by test.sh: what the web page's test needs: Debian's Chromium (driven headless by
# Playwright; no browser is downloaded) and the page's locked dependencies (web/: Vite, polkadot.js).
install_web() {
    if [ ! -x /usr/bin/chromium ]; then
        echo "installing chromium (the web page's test)"
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo=sudo
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium
    fi
    (cd "$(dirname "${BASH_SOURCE[0]}")/../../web" && npm ci --no-audit --no-fund --loglevel=error)
}
