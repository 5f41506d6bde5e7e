# Scheduling hints for `ctest -j` (scripts/test.sh): the longest tests start first, so that no core idles behind
# one of them at the end, on a clean clone too (it has no Testing/Temporary/CTestCostData.txt). A COST set here
# always decides these tests' order (ctest reads its measured costs only for tests without one); the values are
# seconds on a 2-core development machine, and the order is what counts. A name that no longer exists is
# ignored: refresh the list from build/Testing/Temporary/CTestCostData.txt (docs/testing.md). Included by
# CTestTestfile.cmake after gtest_discover_tests' list (CMakeLists.txt); the tests added with add_test there set
# their COST beside it.
set_tests_properties(Gguf.ExportsMatchTheCheckpointAndLlamaCppComputesLmtrainsProbabilities PROPERTIES COST 55)
set_tests_properties(Recipe.EveryOptionMatchesAnIndependentPythonForward PROPERTIES COST 40)
set_tests_properties(Embed.TheQueryCacheIsReusedAndInvalidatedAndBadInputIsRefused PROPERTIES COST 28)
set_tests_properties(Gguf.RefusesWhatLlamaCppsGpt2CannotComputeAndKeepsAForeignOutFile PROPERTIES COST 27)
set_tests_properties(Embed.PoolsMatchPythonAreDeterministicAndWriteEveryFormat PROPERTIES COST 23)
set_tests_properties(Inspect.EveryCommandRunsOnARealCheckpoint PROPERTIES COST 22)
set_tests_properties(MultiHost.ALostHostEndsTheOtherWithExit7AndAFreshHostResumesToTheSameWeights PROPERTIES COST 22)
set_tests_properties(Export.ExportImportExportKeepsEveryTensorAndProbability PROPERTIES COST 18)
set_tests_properties(Report.OnePageFromARealRunThatNothingCanBreakOrClobber PROPERTIES COST 16)
set_tests_properties(Export.HfDirectoryReproducesInspectProbsInAnIndependentGpt2Forward PROPERTIES COST 16)
set_tests_properties(Recipe.KjvModernResumesBitwiseSplitsOverProcessesAndFreezes PROPERTIES COST 15)
set_tests_properties(Export.RopeModelsExportAsGptNeoxAndReproduceInspectProbs PROPERTIES COST 14)
set_tests_properties(CliEndToEnd.TokenizerPrepareTrainCheckpointSample PROPERTIES COST 14)
set_tests_properties(Contrastive.BadPairsFilesExitThreeNamingTheLine PROPERTIES COST 14)
set_tests_properties(MultiHost.TorchrunOnTwoHostsMatchesOneProcessWithTheSameGlobalBatch PROPERTIES COST 13)
set_tests_properties(DistRun.TorchrunNoPythonLaunch PROPERTIES COST 13)
set_tests_properties(Context.EveryVectorMatchesAnIndependentPythonForward PROPERTIES COST 13)
set_tests_properties(CliEndToEnd.BadInputEndsWithOneClearLineAndAnExitCode PROPERTIES COST 12)
set_tests_properties(Bf16.TheReadingCommandsTakeAPrecision PROPERTIES COST 11)
set_tests_properties(DistRun.SigtermedTwoRankRunResumesToTheSameWeights PROPERTIES COST 11)
set_tests_properties(Contrastive.ResumeIsBitwiseAndTwoProcessesMatchGradAccum PROPERTIES COST 11)
set_tests_properties(NewPieces.FinetuneWithNewPiecesFreezesOldRowsAndInitialisesNewOnes PROPERTIES COST 9)
set_tests_properties(Gguf.ByteFallbackTokenizerOfTheKoreanFaqHasNoUnknownPiece PROPERTIES COST 9)
set_tests_properties(Gguf.AFinetuneWithNewPiecesExportsItsLargerVocabulary PROPERTIES COST 9)
set_tests_properties(MultiHost.BadMasterAddressesEndWithExit7NamingThem PROPERTIES COST 8)
