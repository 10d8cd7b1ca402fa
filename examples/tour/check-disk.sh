#!/bin/sh
# The README tour's job that `schedctl run` starts by hand: how full the root file system is (df is on
# every Linux host, so the tour runs anywhere).
df -P / | tail -n 1
