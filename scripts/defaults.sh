# Sourced by the project's shell scripts: the defaults they share, named once.
# The cache of builds, sources and private apt lists (kept across clones and `make clean`).
IMGSTORE_CACHE=${CAFFE_CACHE:-$HOME/.cache/imgstore-caffe}

# private_apt RELEASE [TYPE]: set apt_opts to an apt configuration that reads Debian RELEASE's
# source packages (TYPE deb-src, the default) or binary packages (deb) from its own lists in the
# cache, leaving the system's apt sources alone.
private_apt() {
  local type=${2:-deb-src}
  local dir=$IMGSTORE_CACHE/apt-$1${2:+-$2}
  [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] ||
    { echo "needs /usr/share/keyrings/debian-archive-keyring.gpg (package debian-archive-keyring)" >&2; return 1; }
  mkdir -p "$dir/lists/partial"
  echo "$type [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $1 main" \
    > "$dir/sources.list"
  apt_opts=(-o "Dir::Etc::SourceList=$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o "Dir::State::Lists=$dir/lists" -o APT::Sandbox::User=root -qq)
}
