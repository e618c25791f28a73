# Written by dataecho experiment; run `gnuplot plots.gp` in this folder.
set key outside right top
set grid
do for [fmt in "png svg"] {
if (fmt eq "png") { set terminal pngcairo size 1000,600 noenhanced font "sans,10" } else { set terminal svg size 1000,600 noenhanced font "sans,10" dynamic }
set output "fresh_vs_factor.".fmt
set title "protocol-budgets-r5".": fresh examples to target vs echo factor"
set xlabel "echo factor (adaptive: achieved)"
set ylabel "fresh examples to target (median, 95% bootstrap CI over seeds)"
set xrange [0.5:5.5]
set yrange [0:*]
plot "fresh_vs_factor.dat" index 0 using 1:2:3:4 with yerrorlines pt 7 ps 2 lc rgb "black" title "baseline, baseline-s2925"
}
