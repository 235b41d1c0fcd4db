# Sourced by scripts/same_day_bench.sh (REPORTING=off) and scripts/page_reporting_ab.sh; needs $PY.
# reporting_off: turns the VM kernel's free page reporting off (page_reporting_order at
#   refimpl.lab.env.REPORTING_OFF_ORDER: nothing is reported), touches the free memory once so that every page
#   is backed by the host, and restores the order it found on exit (a trap). Root.
# reporting_on: the order found (after the first call of either), then 20 s for the kernel to report what is free.
PAGE_REPORTING_ORDER=/sys/module/page_reporting/parameters/page_reporting_order

_reporting_save() {
  [[ -n ${REPORTING_ORDER_FOUND:-} ]] && return
  REPORTING_ORDER_FOUND=$(cat $PAGE_REPORTING_ORDER)
  trap 'echo "$REPORTING_ORDER_FOUND" > '"$PAGE_REPORTING_ORDER"'; echo "page_reporting_order restored to $REPORTING_ORDER_FOUND" >&2' EXIT
}

reporting_off() {
  _reporting_save
  local order
  order=$($PY -c "from refimpl.lab.env import REPORTING_OFF_ORDER; print(REPORTING_OFF_ORDER)")
  echo "$order" > $PAGE_REPORTING_ORDER
  $PY -c "
import numpy as np, psutil
keep = []
while psutil.virtual_memory().available > 3 * 2**30:
    keep.append(np.full(2**27, 1, dtype=np.int64))
print(f'touched {len(keep)} GiB once with free page reporting off')" >&2
}

reporting_on() {
  _reporting_save
  echo "$REPORTING_ORDER_FOUND" > $PAGE_REPORTING_ORDER
  sleep 20
}
