//! commbench core: clock, statistics, resource usage, environment, CPU
//! placement and result records shared by every lab.
